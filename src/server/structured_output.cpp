#include "server/structured_output.h"

#include "decoding/grammar/json_schema_grammar.h"
#include "decoding/reasoning_gate.h"
#include "decoding/triggered_constraint.h"
#include "server/api_error.h"
#include "util/error.h"

namespace dflash::server {

using ojson = nlohmann::ordered_json;

namespace {

constexpr size_t kMaskBytesPerGrammar = size_t(32) << 20;

// Whitespace between JSON tokens: one space, or a newline and an indent of up to 16 (four
// levels of four). Small models spend whole answers on whitespace runs when more is allowed.
JsonGrammarOptions json_options() {
  JsonGrammarOptions o;
  o.max_spaces = 1;
  o.max_indent = 16;
  return o;
}

// The parameters schema of a tool (OpenAI: function.parameters; absent: any object).
ojson parameters_of(const ojson& tool) {
  const ojson& fn = tool.at("function");
  if (fn.contains("parameters") && (fn["parameters"].is_object() || fn["parameters"].is_boolean()))
    return fn["parameters"];
  return ojson{{"type", "object"}};
}

std::string name_of(const ojson& tool) { return tool.at("function").at("name").get<std::string>(); }

const std::string kCallOpen = "<tool_call>";

// One hermes call as Qwen3's template writes it: <tool_call>\n{"name": ..., "arguments": ...}\n</tool_call>
// (without its opening tag when `open` is false: what follows the trigger in auto mode).
GrammarBuilder::Expr hermes_call(GrammarBuilder& b, const ojson& tool, bool open = true) {
  return b.seq({b.literal((open ? kCallOpen : std::string()) + "\n{\"name\": " + ojson(name_of(tool)).dump() + ", \"arguments\": "),
                json_schema(b, parameters_of(tool), json_options()), b.literal("}\n</tool_call>")});
}

// A parameter's text in the XML form: a string is raw text (no '<', which would start the
// closing tag), an enum of strings one of them, anything else its JSON.
GrammarBuilder::Expr xml_value(GrammarBuilder& b, const ojson& schema) {
  if (schema.is_object() && schema.contains("enum") && schema["enum"].is_array() && !schema["enum"].empty()) {
    bool all_strings = true;
    for (const auto& v : schema["enum"]) all_strings = all_strings && v.is_string();
    if (all_strings) {
      std::vector<GrammarBuilder::Expr> opts;
      for (const auto& v : schema["enum"]) opts.push_back(b.literal(v.get<std::string>()));
      return b.alt(opts);
    }
  }
  if (schema.is_object() && schema.value("type", ojson()) == "string" && !schema.contains("pattern") &&
      !schema.contains("enum") && !schema.contains("const")) {
    ByteSet text;
    for (int c = 0; c < 256; ++c)
      if (c != '<') text.add(uint8_t(c));
    const int lo = schema.value("minLength", 0), hi = schema.contains("maxLength") ? schema["maxLength"].get<int>() : -1;
    return b.repeat(b.byte_class(text), std::max(lo, 1), hi);
  }
  return json_schema(b, schema, json_options());
}

// One call in Qwen3.5's XML form: the declared parameters in order, required ones always.
GrammarBuilder::Expr xml_call(GrammarBuilder& b, const ojson& tool, bool open = true) {
  const ojson params = parameters_of(tool);
  std::vector<GrammarBuilder::Expr> parts{b.literal((open ? kCallOpen : std::string()) + "\n<function=" + name_of(tool) + ">\n")};
  if (params.is_object() && params.contains("properties") && params["properties"].is_object()) {
    std::vector<std::string> required;
    if (params.contains("required") && params["required"].is_array())
      for (const auto& r : params["required"]) required.push_back(r.get<std::string>());
    for (const auto& [name, schema] : params["properties"].items()) {
      auto one = b.seq({b.literal("<parameter=" + name + ">\n"), xml_value(b, schema), b.literal("\n</parameter>\n")});
      const bool req = std::find(required.begin(), required.end(), name) != required.end();
      parts.push_back(req ? one : b.optional(one));
    }
  }
  parts.push_back(b.literal("</function>\n</tool_call>"));
  return b.seq(parts);
}

}  // namespace

ReasoningStart reasoning_start(const std::vector<int32_t>& prompt, const Tokenizer& tok, const ThinkTokens& think) {
  if (!think.known()) return ReasoningStart::None;
  if (prompt_opens_think(prompt, think)) return ReasoningStart::Open;
  for (size_t i = prompt.size(); i-- > 0;) {
    if (prompt[i] == *think.close) return ReasoningStart::None;  // "<think>\n\n</think>\n\n": thinking off
    const std::string text = tok.token_bytes(prompt[i]);
    if (text.find_first_not_of(" \t\r\n") != std::string::npos) break;
  }
  return ReasoningStart::MayOpen;
}

StructuredOutput::StructuredOutput(const Tokenizer& tok, int vocab, std::vector<int32_t> stop_ids, ThinkTokens think)
    : tok_(tok), vocab_(vocab), stop_ids_(std::move(stop_ids)), think_(think) {}

const std::shared_ptr<const TokenTable>& StructuredOutput::table() {
  if (!table_) table_ = TokenTable::from_tokenizer(tok_, vocab_);
  return table_;
}

template <class Build>
StructuredOutput::Compiled StructuredOutput::compiled(const std::string& key, Build build) {
  std::lock_guard<std::mutex> lock(mu_);
  for (auto it = cache_.begin(); it != cache_.end(); ++it)
    if (it->first == key) {
      cache_.splice(cache_.begin(), cache_, it);
      return it->second;
    }
  GrammarBuilder b;
  Compiled c;
  c.grammar = b.build(build(b));
  c.masks = std::make_shared<MaskCache>(c.grammar, table(), kMaskBytesPerGrammar);
  cache_.emplace_front(key, c);
  if (cache_.size() > kCachedGrammars) cache_.pop_back();
  return c;
}

std::shared_ptr<TokenConstraint> StructuredOutput::constraint(const Compiled& c, ReasoningStart r) {
  auto inner = std::make_unique<GrammarConstraint>(c.grammar, c.masks->table(), c.masks, stop_ids_);
  const bool gate = r != ReasoningStart::None && think_.known();
  return std::make_shared<ReasoningGate>(std::move(inner), vocab_, gate ? think_.open : std::nullopt,
                                         gate ? think_.close : std::nullopt, r == ReasoningStart::Open, stop_ids_);
}

std::shared_ptr<TokenConstraint> StructuredOutput::for_response_format(const ojson& rf, ReasoningStart r) {
  const bool object = rf.value("type", std::string()) == "json_object";
  ojson schema = true;
  if (!object && rf["json_schema"].contains("schema")) schema = rf["json_schema"]["schema"];
  try {
    const Compiled c = compiled(object ? std::string("json_object") : "json_schema:" + schema.dump(),
                                [&](GrammarBuilder& b) { return object ? json_object(b, json_options()) : json_schema(b, schema, json_options()); });
    return constraint(c, r);
  } catch (const Error& e) {
    throw ApiError(400, std::string("response_format: ") + e.what(), "invalid_request_error", "response_format",
                   "invalid_schema");
  }
}

// The grammar of the calls `f` allows, each with its opening tag or (`open` false) without.
StructuredOutput::Compiled StructuredOutput::call_grammar(const ForcedToolCall& f, bool open, bool repeat) {
  const std::string key = std::string(open ? "tool:" : "tool-body:") + tool_format_name(f.format) + ":" +
                          f.function + ":" + (repeat ? "1:" : "0:") + f.tools.dump();
  try {
    return compiled(key, [&](GrammarBuilder& b) {
      std::vector<GrammarBuilder::Expr> calls;
      for (const ojson& tool : f.tools)
        if (f.function.empty() || name_of(tool) == f.function)
          calls.push_back(f.format == ToolFormat::Xml ? xml_call(b, tool, open) : hermes_call(b, tool, open));
      const auto one = b.alt(calls);
      if (!repeat) return one;
      return b.seq({one, b.repeat(b.seq({b.literal("\n"), one}), 0, -1)});
    });
  } catch (const Error& e) {
    throw ApiError(400, std::string("tools: a function's parameters schema: ") + e.what(), "invalid_request_error",
                   "tools", "invalid_schema");
  } catch (const nlohmann::json::exception& e) {
    // A tool without a string function.name, a non-string in "required", a non-integer
    // maxLength: what the XML form's value rules read directly.
    throw ApiError(400, std::string("tools: a function's definition is malformed: ") + e.what(),
                   "invalid_request_error", "tools", "invalid_schema");
  }
}

std::shared_ptr<TokenConstraint> StructuredOutput::for_tool_call(const ForcedToolCall& f, ReasoningStart r) {
  if (f.format == ToolFormat::None)
    throw ApiError(400,
                   "tool_choice \"required\" or a named function needs a chat template that writes tool calls; "
                   "this model's does not",
                   "invalid_request_error", "tool_choice", "unsupported_value");
  return constraint(call_grammar(f, /*open=*/true, f.parallel), r);
}

std::shared_ptr<TokenConstraint> StructuredOutput::for_tool_trigger(const ForcedToolCall& f, ReasoningStart r) {
  if (f.format == ToolFormat::None) throw Error("this model's chat template writes no tool calls");
  ForcedToolCall any = f;
  any.function.clear();
  const Compiled c = call_grammar(any, /*open=*/false, /*repeat=*/false);
  auto body = std::make_unique<GrammarConstraint>(c.grammar, c.masks->table(), c.masks, stop_ids_);
  const bool think = r != ReasoningStart::None && think_.known();
  return std::make_shared<TriggeredConstraint>(std::move(body), c.masks->table(), kCallOpen,
                                               think ? think_.open : std::nullopt, think ? think_.close : std::nullopt,
                                               r == ReasoningStart::Open);
}

}  // namespace dflash::server
