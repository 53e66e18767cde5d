#include "server/openai_protocol.h"

#include <algorithm>
#include <cmath>
#include <limits>
#include <random>

#include "decoding/logprobs.h"
#include "server/api_error.h"
#include "server/json_body.h"

namespace dflash::server {

namespace {

const char* kind(const ojson& v) {
  switch (v.type()) {
    case ojson::value_t::null: return "null";
    case ojson::value_t::boolean: return "a boolean";
    case ojson::value_t::string: return "a string";
    case ojson::value_t::array: return "an array";
    case ojson::value_t::object: return "an object";
    default: return "a number";
  }
}

bool present(const ojson& b, const char* key) { return b.contains(key) && !b[key].is_null(); }

std::optional<bool> get_bool(const ojson& b, const char* key) {
  if (!present(b, key)) return std::nullopt;
  if (!b[key].is_boolean()) throw bad_param(key, std::string("'") + key + "' must be a boolean, not " + kind(b[key]));
  return b[key].get<bool>();
}

std::optional<double> get_number(const ojson& b, const char* key, double lo, double hi) {
  if (!present(b, key)) return std::nullopt;
  const ojson& v = b[key];
  if (!v.is_number()) throw bad_param(key, std::string("'") + key + "' must be a number, not " + kind(v));
  const double x = v.get<double>();
  if (!(x >= lo && x <= hi))
    throw bad_param(key, std::string("'") + key + "' must be between " + ojson(lo).dump() + " and " + ojson(hi).dump());
  return x;
}

// Integers may arrive as 100 or 100.0 (or 1e2); anything else with a fraction is an error.
std::optional<long long> get_int(const ojson& b, const char* key, long long lo, long long hi) {
  if (!present(b, key)) return std::nullopt;
  const ojson& v = b[key];
  const std::string range = std::string("'") + key + "' must be an integer between " + std::to_string(lo) + " and " +
                            std::to_string(hi);
  if (v.is_number_unsigned()) {
    const uint64_t u = v.get<uint64_t>();
    if (u > uint64_t(hi) || (lo > 0 && u < uint64_t(lo))) throw bad_param(key, range);
    return (long long)u;
  }
  if (v.is_number_integer()) {
    const long long x = v.get<long long>();
    if (x < lo || x > hi) throw bad_param(key, range);
    return x;
  }
  if (v.is_number_float()) {
    const double x = v.get<double>();
    if (!(x >= double(lo) && x <= double(hi)) || std::floor(x) != x) throw bad_param(key, range);
    return (long long)x;
  }
  throw bad_param(key, std::string("'") + key + "' must be an integer, not " + kind(v));
}

std::string content_text(const ojson& c, const std::string& param) {
  if (c.is_null()) return "";
  if (c.is_string()) return c.get<std::string>();
  if (!c.is_array()) throw bad_param(param, "'" + param + "' must be a string or an array of content parts, not " + kind(c));
  std::string out;
  bool first = true;
  for (size_t i = 0; i < c.size(); ++i) {
    const ojson& part = c[i];
    const std::string p = param + "[" + std::to_string(i) + "]";
    if (!part.is_object()) throw bad_param(p, "content part '" + p + "' must be an object");
    if (!part.contains("type") || !part["type"].is_string())
      throw bad_param(p + ".type", "content part '" + p + "' needs a string 'type'");
    const std::string type = part["type"].get<std::string>();
    if (type != "text" && type != "input_text")
      throw bad_param(p + ".type", "content part type '" + type + "' is not supported: this server takes text only");
    if (!part.contains("text") || !part["text"].is_string())
      throw bad_param(p + ".text", "text content part '" + p + "' needs a string 'text'");
    if (!first) out += "\n";  // parts are separate paragraphs of one message
    out += part["text"].get<std::string>();
    first = false;
  }
  return out;
}

ojson normalize_messages(const ojson& b) {
  if (!b.contains("messages")) throw ApiError(400, "'messages' is required", "invalid_request_error", "messages", "missing_required_parameter");
  const ojson& ms = b["messages"];
  if (!ms.is_array()) throw bad_param("messages", std::string("'messages' must be an array, not ") + kind(ms));
  if (ms.empty()) throw bad_param("messages", "'messages' must contain at least one message");
  ojson out = ojson::array();
  for (size_t i = 0; i < ms.size(); ++i) {
    const ojson& m = ms[i];
    const std::string p = "messages[" + std::to_string(i) + "]";
    if (!m.is_object()) throw bad_param(p, "'" + p + "' must be an object, not " + kind(m));
    if (!m.contains("role") || !m["role"].is_string())
      throw bad_param(p + ".role", "'" + p + ".role' must be a string");
    std::string role = m["role"].get<std::string>();
    if (role == "developer") role = "system";  // OpenAI's newer name for the system turn
    if (role != "system" && role != "user" && role != "assistant" && role != "tool")
      throw bad_param(p + ".role", "unknown role '" + role + "' (system, developer, user, assistant or tool)");
    if (!m.contains("content") && !(role == "assistant" && m.contains("tool_calls")))
      throw bad_param(p + ".content", "'" + p + ".content' is required");
    ojson n = ojson::object();
    n["role"] = role;
    n["content"] = content_text(m.contains("content") ? m["content"] : ojson(), p + ".content");
    for (const char* key : {"name", "tool_call_id", "reasoning_content"})
      if (present(m, key)) {
        if (!m[key].is_string()) throw bad_param(p + "." + key, "'" + p + "." + key + "' must be a string");
        n[key] = m[key];
      }
    if (present(m, "tool_calls")) {
      if (!m["tool_calls"].is_array()) throw bad_param(p + ".tool_calls", "'" + p + ".tool_calls' must be an array");
      n["tool_calls"] = m["tool_calls"];
      // OpenAI clients send a call's arguments as a JSON string; chat templates expect the
      // object (Qwen3.5's iterates it with |items and fails on a string). As vLLM does, a
      // string that parses as a JSON object is handed to the template as that object.
      for (ojson& call : n["tool_calls"])
        if (call.is_object() && call.contains("function") && call["function"].is_object() &&
            call["function"].contains("arguments") && call["function"]["arguments"].is_string()) {
          ojson args = ojson::parse(call["function"]["arguments"].get<std::string>(), nullptr, false);
          if (args.is_object()) call["function"]["arguments"] = std::move(args);
        }
    }
    out.push_back(std::move(n));
  }
  return out;
}

std::vector<std::string> parse_stop(const ojson& b) {
  std::vector<std::string> out;
  if (!present(b, "stop")) return out;
  const ojson& s = b["stop"];
  if (s.is_string()) {
    out.push_back(s.get<std::string>());
  } else if (s.is_array()) {
    if (s.size() > 16) throw bad_param("stop", "'stop' may hold at most 16 strings");
    for (const ojson& x : s) {
      if (!x.is_string()) throw bad_param("stop", "'stop' must be a string or an array of strings");
      out.push_back(x.get<std::string>());
    }
  } else {
    throw bad_param("stop", std::string("'stop' must be a string or an array of strings, not ") + kind(s));
  }
  return out;
}

ApiError unsupported(const char* param, const std::string& what) {
  return ApiError(400, what + " is not supported yet", "invalid_request_error", param, "unsupported_parameter");
}

// Fields this server does not implement yet are refused when they would change the answer,
// instead of being ignored with a 200 the client would trust. Their neutral values pass.
void refuse_unimplemented(const ojson& b) {
  if (present(b, "best_of") && get_int(b, "best_of", 1, 1 << 20).value_or(1) != 1)
    throw unsupported("best_of", "'best_of' other than 1 (several candidates, the best one returned)");
}

// {"token id": bias}: ids as decimal strings, biases in [-100, 100], at most kMaxLogitBias.
std::vector<std::pair<int32_t, float>> parse_logit_bias(const ojson& b) {
  std::vector<std::pair<int32_t, float>> out;
  if (!present(b, "logit_bias")) return out;
  const ojson& m = b["logit_bias"];
  if (!m.is_object())
    throw bad_param("logit_bias", std::string("'logit_bias' must be an object mapping token ids to biases, not ") + kind(m));
  if (m.size() > kMaxLogitBias)
    throw bad_param("logit_bias", "'logit_bias' may hold at most " + std::to_string(kMaxLogitBias) + " entries");
  for (const auto& [key, v] : m.items()) {
    const bool digits = !key.empty() && key.size() <= 10 &&
                        std::all_of(key.begin(), key.end(), [](char c) { return c >= '0' && c <= '9'; });
    const long long id = digits ? std::stoll(key) : -1;
    if (!digits || id > std::numeric_limits<int32_t>::max())
      throw bad_param("logit_bias", "'logit_bias' key '" + key + "' is not a token id");
    if (!v.is_number()) throw bad_param("logit_bias", "'logit_bias' value for token " + key + " must be a number, not " + kind(v));
    const double x = v.get<double>();
    if (!(x >= -100 && x <= 100)) throw bad_param("logit_bias", "'logit_bias' values must be between -100 and 100");
    out.push_back({int32_t(id), float(x)});
  }
  return out;
}

// {"type": "text" | "json_object" | "json_schema", "json_schema": {"name", "schema", "strict"}}:
// the shape is checked here, the schema itself where it is compiled (structured_output.h).
ojson parse_response_format(const ojson& f) {
  auto bad = [](const std::string& why) { return bad_param("response_format", why); };
  if (!f.is_object()) throw bad(std::string("'response_format' must be an object, not ") + kind(f));
  if (!f.contains("type") || !f["type"].is_string())
    throw bad("'response_format' needs a string 'type': \"text\", \"json_object\" or \"json_schema\"");
  const std::string type = f["type"].get<std::string>();
  if (type == "text") return nullptr;
  if (type == "json_object") return f;
  if (type != "json_schema")
    throw bad("'response_format.type' must be \"text\", \"json_object\" or \"json_schema\", not \"" + type + "\"");
  if (!f.contains("json_schema") || !f["json_schema"].is_object())
    throw bad("'response_format' of type \"json_schema\" needs a 'json_schema' object ({\"name\", \"schema\"})");
  const ojson& js = f["json_schema"];
  if (js.contains("name") && !js["name"].is_string()) throw bad("'response_format.json_schema.name' must be a string");
  if (js.contains("strict") && !js["strict"].is_boolean() && !js["strict"].is_null())
    throw bad("'response_format.json_schema.strict' must be a boolean");
  if (js.contains("schema") && !js["schema"].is_object() && !js["schema"].is_boolean())
    throw bad("'response_format.json_schema.schema' must be a JSON Schema object");
  return f;
}

// Fields both endpoints share.
void parse_common(const ojson& b, const SamplingParams& defaults, ApiRequest& r) {
  if (present(b, "model")) {
    if (!b["model"].is_string()) throw bad_param("model", std::string("'model' must be a string, not ") + kind(b["model"]));
    r.model = b["model"].get<std::string>();
  }
  r.stream = get_bool(b, "stream").value_or(false);
  if (present(b, "stream_options")) {
    if (!b["stream_options"].is_object()) throw bad_param("stream_options", "'stream_options' must be an object");
    r.include_usage = get_bool(b["stream_options"], "include_usage").value_or(false);
  }
  constexpr long long kMaxTokens = 1 << 30;
  auto mt = get_int(b, "max_completion_tokens", 1, kMaxTokens);
  if (!mt) mt = get_int(b, "max_tokens", 1, kMaxTokens);
  if (mt) r.max_tokens = int(*mt);
  r.n = int(get_int(b, "n", 1, kMaxChoices).value_or(1));
  if (present(b, "response_format")) r.response_format = parse_response_format(b["response_format"]);
  refuse_unimplemented(b);
  SamplingParams& s = r.sampling;
  s = defaults;
  if (auto v = get_number(b, "temperature", 0, 100)) s.temperature = float(*v);
  if (auto v = get_number(b, "top_p", 0, 1)) s.top_p = float(*v);
  if (auto v = get_int(b, "top_k", -1, 1 << 24)) s.top_k = *v < 0 ? 0 : int(*v);  // -1: off (vLLM)
  if (auto v = get_number(b, "min_p", 0, 1)) s.min_p = float(*v);
  if (auto v = get_number(b, "repetition_penalty", 0.01, 100)) s.repetition_penalty = float(*v);
  if (auto v = get_number(b, "presence_penalty", -2, 2)) s.presence_penalty = float(*v);
  if (auto v = get_number(b, "frequency_penalty", -2, 2)) s.frequency_penalty = float(*v);
  s.logit_bias = parse_logit_bias(b);
  if (present(b, "seed")) {
    const ojson& v = b["seed"];
    if (v.is_number_unsigned()) s.seed = v.get<uint64_t>();
    else if (v.is_number_integer()) s.seed = uint64_t(v.get<int64_t>());
    else throw bad_param("seed", std::string("'seed' must be an integer, not ") + kind(v));
    r.seed_given = true;
  } else {
    // Without a seed, sampled answers differ from request to request, as clients expect.
    static thread_local std::mt19937_64 rng{std::random_device{}()};
    s.seed = rng();
  }
  r.stop = parse_stop(b);
  if (auto v = get_int(b, "think_cap", 0, kMaxTokens)) r.think_cap = int(*v);
  r.ignore_eos = get_bool(b, "ignore_eos").value_or(false);
  r.return_tokens = get_bool(b, "return_tokens").value_or(false);
}

}  // namespace

void check_logit_bias(const SamplingParams& s, int vocab) {
  for (const auto& [t, b] : s.logit_bias)
    if (t < 0 || t >= vocab)
      throw bad_param("logit_bias", "'logit_bias' token id " + std::to_string(t) + " is outside the vocabulary (size " +
                                        std::to_string(vocab) + ")");
}

ojson parse_body(const std::string& body) {
  ojson j = parse_json_body(body);
  if (!j.is_object()) throw ApiError(400, "the request body must be a JSON object", "invalid_request_error", "", "invalid_json");
  return j;
}

ApiRequest parse_chat_request(const ojson& b, const SamplingParams& defaults) {
  ApiRequest r;
  parse_common(b, defaults, r);
  r.messages = normalize_messages(b);
  if (present(b, "tools")) {
    if (!b["tools"].is_array()) throw bad_param("tools", "'tools' must be an array");
    if (!b["tools"].empty()) r.tools = b["tools"];
  }
  parse_tool_choice(b, r);
  if (present(b, "chat_template_kwargs")) {
    if (!b["chat_template_kwargs"].is_object()) throw bad_param("chat_template_kwargs", "'chat_template_kwargs' must be an object");
    r.template_kwargs = b["chat_template_kwargs"];
  }
  if (auto t = get_bool(b, "enable_thinking")) r.template_kwargs["enable_thinking"] = *t;
  // OpenAI's rules: top_logprobs (0..20) only with logprobs: true; logprobs alone gives each
  // token's own logprob with an empty top_logprobs list.
  const int top = int(get_int(b, "top_logprobs", 0, kMaxTopLogprobs).value_or(0));
  const bool want = get_bool(b, "logprobs").value_or(false);
  if (top > 0 && !want) throw bad_param("top_logprobs", "'top_logprobs' needs 'logprobs': true");
  r.logprobs = want ? std::max(top, 0) : -1;
  r.add_generation_prompt = get_bool(b, "add_generation_prompt").value_or(true);
  r.continue_final_message = get_bool(b, "continue_final_message").value_or(false);
  if (r.continue_final_message) {
    if (present(b, "add_generation_prompt") && r.add_generation_prompt)
      throw bad_param("continue_final_message", "continue_final_message and add_generation_prompt cannot both be true");
    if (r.messages.back()["role"] != "assistant")
      throw bad_param("continue_final_message", "continue_final_message needs an assistant message last");
    r.add_generation_prompt = false;
  }
  if (r.template_kwargs.contains("enable_thinking") && !r.template_kwargs["enable_thinking"].is_boolean())
    throw bad_param("chat_template_kwargs.enable_thinking", "'enable_thinking' must be a boolean");
  return r;
}

ApiRequest parse_completion_request(const ojson& b, const SamplingParams& defaults) {
  ApiRequest r;
  parse_common(b, defaults, r);
  // Legacy logprobs is a count: each token's logprob plus that many alternatives (OpenAI
  // allows 0..5; this server up to 20, as chat's top_logprobs and vLLM's default limit).
  // top_logprobs is chat's field: refused here rather than ignored.
  if (present(b, "tool_choice") && b["tool_choice"] != "none" && b["tool_choice"] != "auto")
    throw unsupported("tool_choice", "'tool_choice' on /v1/completions (tools are a chat feature)");
  if (get_int(b, "top_logprobs", 0, kMaxTopLogprobs).value_or(0) > 0)
    throw unsupported("top_logprobs", "'top_logprobs' on /v1/completions (use 'logprobs': N)");
  if (present(b, "logprobs") && !(b["logprobs"].is_boolean() && !b["logprobs"].get<bool>())) {
    if (b["logprobs"].is_boolean())
      throw bad_param("logprobs", "'logprobs' on /v1/completions is a count of alternatives (0 to 20), not true");
    r.logprobs = int(*get_int(b, "logprobs", 0, kMaxTopLogprobs));
  }
  if (!b.contains("prompt"))
    throw ApiError(400, "'prompt' is required", "invalid_request_error", "prompt", "missing_required_parameter");
  ojson p = b["prompt"];
  // A one-element batch is the same as its element; larger batches (several prompts) are refused.
  if (p.is_array() && p.size() == 1 && (p[0].is_string() || p[0].is_array())) p = ojson(p[0]);
  if (p.is_string()) {
    r.prompt_text = p.get<std::string>();
    if (r.prompt_text.empty()) throw bad_param("prompt", "'prompt' is empty");
  } else if (p.is_array()) {
    if (p.empty()) throw bad_param("prompt", "'prompt' is empty");
    for (const ojson& x : p) {
      if (!x.is_number_integer() && !x.is_number_unsigned())
        throw bad_param("prompt", "'prompt' must be a string or an array of token ids (one prompt per request)");
      if (x.is_number_unsigned() && x.get<uint64_t>() > uint64_t(std::numeric_limits<int32_t>::max()))
        throw bad_param("prompt", "token id " + x.dump() + " is out of range");
      r.prompt_ids.push_back(x.get<int64_t>());
    }
    r.prompt_is_ids = true;
  } else {
    throw bad_param("prompt", std::string("'prompt' must be a string or an array of token ids, not ") + kind(p));
  }
  return r;
}

void parse_tool_choice(const ojson& b, ApiRequest& r) {
  if (auto p = get_bool(b, "parallel_tool_calls")) r.parallel_tool_calls = *p;
  if (!present(b, "tool_choice")) return;
  const ojson& c = b["tool_choice"];
  const char* shapes = "'tool_choice' must be \"none\", \"auto\", \"required\" or {\"type\": \"function\", \"function\": {\"name\": ...}}";
  if (c.is_string()) {
    const std::string v = c.get<std::string>();
    if (v == "none") r.tool_choice.mode = ToolChoiceMode::None;
    else if (v == "auto") r.tool_choice.mode = ToolChoiceMode::Auto;
    else if (v == "required") r.tool_choice.mode = ToolChoiceMode::Required;
    else throw bad_param("tool_choice", std::string(shapes) + ", not \"" + v + "\"");
  } else if (c.is_object()) {
    if (!c.contains("type") || c["type"] != "function") throw bad_param("tool_choice.type", std::string(shapes) + " (type must be \"function\")");
    if (!c.contains("function") || !c["function"].is_object() || !c["function"].contains("name") ||
        !c["function"]["name"].is_string())
      throw bad_param("tool_choice.function.name", std::string(shapes) + " (function.name must be a string)");
    r.tool_choice.mode = ToolChoiceMode::Named;
    r.tool_choice.function = c["function"]["name"].get<std::string>();
  } else {
    throw bad_param("tool_choice", std::string(shapes) + ", not " + kind(c));
  }
  if (r.tool_choice.mode == ToolChoiceMode::Required || r.tool_choice.mode == ToolChoiceMode::Named) {
    if (!r.tools.is_array() || r.tools.empty())
      throw bad_param("tool_choice", "'tool_choice' \"required\" or a named function needs a non-empty 'tools' array");
  }
  if (r.tool_choice.mode == ToolChoiceMode::Named) {
    for (const ojson& t : r.tools)
      if (t.is_object() && t.contains("function") && t["function"].is_object() && t["function"].contains("name") &&
          t["function"]["name"] == r.tool_choice.function)
        return;
    throw bad_param("tool_choice.function.name",
                    "'tool_choice' names the function '" + r.tool_choice.function + "', which is not among 'tools'");
  }
}

ojson template_context(const ApiRequest& req, const Engine& engine) {
  ojson ctx = ojson::object();
  for (const auto& [k, v] : req.template_kwargs.items()) ctx[k] = v;
  ctx["messages"] = req.messages;
  ctx["add_generation_prompt"] = req.add_generation_prompt;
  if (auto bos = engine.bos_text()) ctx["bos_token"] = *bos;
  if (auto eos = engine.eos_text()) ctx["eos_token"] = *eos;
  if (!req.tools.is_null()) ctx["tools"] = req.tools;
  return ctx;
}

std::string cut_after_final_message(const std::string& rendered, const std::string& final_content) {
  auto is_ws = [](char ch) { return ch == ' ' || ch == '\n' || ch == '\r' || ch == '\t'; };
  size_t b = 0, e = final_content.size();
  while (b < e && is_ws(final_content[b])) ++b;
  while (e > b && is_ws(final_content[e - 1])) --e;
  const std::string stripped = final_content.substr(b, e - b);
  const size_t at = stripped.empty() ? std::string::npos : rendered.rfind(stripped);
  if (at == std::string::npos)
    throw bad_param("continue_final_message", "the chat template does not keep the final message's text, so it cannot be continued");
  const std::string lstripped = final_content.substr(b);
  if (rendered.compare(at, lstripped.size(), lstripped) == 0) return rendered.substr(0, at + lstripped.size());
  return rendered.substr(0, at + stripped.size());
}

ojson usage_json(const GenResult& r) {
  return {{"prompt_tokens", r.prompt_tokens},
          {"completion_tokens", r.completion_tokens()},
          {"total_tokens", r.prompt_tokens + r.completion_tokens()},
          {"prompt_tokens_details", {{"cached_tokens", r.cached_tokens}}}};
}

ojson usage_json(const std::vector<GenResult>& choices) {
  ojson u = usage_json(choices.at(0));
  int completion = 0;
  for (const GenResult& r : choices) completion += r.completion_tokens();
  u["completion_tokens"] = completion;
  u["total_tokens"] = choices[0].prompt_tokens + completion;
  return u;
}

ojson chat_response(const ResponseMeta& m, const GenResult& r, bool return_tokens, const ojson& logprobs) {
  ojson msg = {{"role", "assistant"}, {"content", r.content}};
  if (!r.reasoning.empty()) msg["reasoning_content"] = r.reasoning;
  ojson choice = {{"index", 0}, {"message", msg}, {"logprobs", logprobs}, {"finish_reason", r.finish_reason}};
  if (return_tokens) choice["tokens"] = r.ids;
  return {{"id", m.id},       {"object", "chat.completion"}, {"created", m.created},  {"model", m.model},
          {"choices", {choice}}, {"usage", usage_json(r)},   {"dflash", ojson(r.dflash)}};
}

ojson chat_chunk(const ResponseMeta& m, const ojson& delta, const std::string& finish_reason, const ojson& logprobs) {
  ojson choice = {{"index", 0}, {"delta", delta}, {"logprobs", logprobs}};
  choice["finish_reason"] = finish_reason.empty() ? ojson() : ojson(finish_reason);
  return {{"id", m.id}, {"object", "chat.completion.chunk"}, {"created", m.created}, {"model", m.model}, {"choices", {choice}}};
}

ojson completion_response(const ResponseMeta& m, const GenResult& r, bool return_tokens, const ojson& logprobs) {
  ojson choice = {{"index", 0}, {"text", r.content}, {"logprobs", logprobs}, {"finish_reason", r.finish_reason}};
  if (return_tokens) choice["tokens"] = r.ids;
  return {{"id", m.id},       {"object", "text_completion"}, {"created", m.created}, {"model", m.model},
          {"choices", {choice}}, {"usage", usage_json(r)},   {"dflash", ojson(r.dflash)}};
}

ojson completion_chunk(const ResponseMeta& m, const std::string& text, const std::string& finish_reason,
                       const ojson& logprobs) {
  ojson choice = {{"index", 0}, {"text", text}, {"logprobs", logprobs}};
  choice["finish_reason"] = finish_reason.empty() ? ojson() : ojson(finish_reason);
  return {{"id", m.id}, {"object", "text_completion"}, {"created", m.created}, {"model", m.model}, {"choices", {choice}}};
}

std::string dump(const ojson& j) { return j.dump(-1, ' ', false, ojson::error_handler_t::replace); }

}  // namespace dflash::server
