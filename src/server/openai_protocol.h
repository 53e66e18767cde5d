#pragma once
// OpenAI request parsing (every field checked, with a 400 naming it) and response shapes.
#include <optional>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "decoding/sampler.h"
#include "server/engine.h"

namespace dflash::server {

using ojson = nlohmann::ordered_json;

enum class ToolChoiceMode { None, Auto, Required, Named };
struct ToolChoice {
  ToolChoiceMode mode = ToolChoiceMode::Auto;
  std::string function;               // Named: the function's name
};

struct ApiRequest {
  std::string model;                  // as the client named it; empty when absent
  bool stream = false, include_usage = false;
  std::optional<int> max_tokens;
  SamplingParams sampling;           // logit_bias ids are checked against the vocabulary later
  bool seed_given = false;
  int n = 1;                          // choices: choice i samples with seed + i
  std::vector<std::string> stop;
  std::optional<int> think_cap;
  bool ignore_eos = false;            // non-standard (vLLM, llama.cpp): benchmarks
  bool return_tokens = false;         // non-standard: choices[0].tokens = generated ids
  // -1: no logprobs; else alternatives per token (chat: logprobs true + top_logprobs;
  // completions: logprobs N).
  int logprobs = -1;
  // response_format when it asks for JSON (json_object / json_schema, shape checked); null
  // for none or "text".
  ojson response_format;
  // /v1/chat/completions
  ojson messages = ojson::array();    // normalized: string content
  ojson tools;                        // null when absent
  // tool_choice and parallel_tool_calls (docs/server.md, "Tool calls"). Required and Named
  // are parsed like Auto today: nothing forces the call yet (GenRequest::forced_tool_call is
  // where the constrained decoding that does will read them).
  ToolChoice tool_choice;
  bool parallel_tool_calls = true;
  ojson template_kwargs = ojson::object();
  bool add_generation_prompt = true;
  bool continue_final_message = false;  // vLLM/HF: the answer continues the last assistant turn
  // /v1/completions
  std::string prompt_text;
  std::vector<int64_t> prompt_ids;
  bool prompt_is_ids = false;
};

constexpr int kMaxChoices = 16;       // n
constexpr size_t kMaxLogitBias = 300;   // logit_bias entries (OpenAI's limit)

// ApiError 400 naming logit_bias when an id of `s.logit_bias` is outside the vocabulary.
void check_logit_bias(const SamplingParams& s, int vocab);

// A JSON object or ApiError 400 (malformed JSON, invalid UTF-8, not an object).
ojson parse_body(const std::string& body);
ApiRequest parse_chat_request(const ojson& body, const SamplingParams& defaults);
ApiRequest parse_completion_request(const ojson& body, const SamplingParams& defaults);

// tool_choice and parallel_tool_calls into `r` (r.tools already parsed); ApiError 400 naming
// the field for anything else or a function not among the tools.
void parse_tool_choice(const ojson& body, ApiRequest& r);

// The chat template's context: messages, add_generation_prompt, bos/eos, tools, kwargs.
ojson template_context(const ApiRequest& req, const Engine& engine);
// The rendered conversation cut right after the final message's text (continue_final_message),
// as transformers does it; ApiError 400 when the template dropped that text.
std::string cut_after_final_message(const std::string& rendered, const std::string& final_content);

ojson usage_json(const GenResult& r);
// n > 1: the prompt counted once (the first choice's; its cached tokens), completions summed.
ojson usage_json(const std::vector<GenResult>& choices);

struct ResponseMeta {
  std::string id, model;
  long long created = 0;
};

// `logprobs`: the choice's logprobs object (logprobs_json.h), null when not asked for.
ojson chat_response(const ResponseMeta& m, const GenResult& r, bool return_tokens, const ojson& logprobs = nullptr);
// One chat.completion.chunk; finish_reason empty: null.
ojson chat_chunk(const ResponseMeta& m, const ojson& delta, const std::string& finish_reason,
                 const ojson& logprobs = nullptr);
ojson completion_response(const ResponseMeta& m, const GenResult& r, bool return_tokens, const ojson& logprobs = nullptr);
ojson completion_chunk(const ResponseMeta& m, const std::string& text, const std::string& finish_reason,
                       const ojson& logprobs = nullptr);

// Compact JSON; invalid UTF-8 (never expected in output) is replaced rather than thrown on.
std::string dump(const ojson& j);

}  // namespace dflash::server
