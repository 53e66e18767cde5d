#pragma once
// Structured output and forced tool calls: a request's response_format (json_object,
// json_schema) or tool_choice "required" / a named function becomes the TokenConstraint its
// decoding follows (decoding/grammar). Compiled grammars are cached by what they were built
// from, each with its masks (grammar/token_mask.h), so the same schema in the next request
// starts warm; the token table is built once, at the first constrained request.
#include <list>
#include <memory>
#include <mutex>
#include <string>
#include <utility>
#include <vector>

#include <nlohmann/json.hpp>

#include "decoding/grammar/grammar_constraint.h"
#include "decoding/token_constraint.h"
#include "server/reasoning.h"
#include "server/tool_calls.h"
#include "tokenizer/tokenizer.h"

namespace dflash::server {

// Where the answer's constraint starts, from the prompt's end: no reasoning (completions, or a
// template that closed an empty think block: thinking off), the model may open a think block
// (Qwen3's generation prompt), or the prompt left one open (templates that pre-open it).
enum class ReasoningStart { None, MayOpen, Open };
ReasoningStart reasoning_start(const std::vector<int32_t>& prompt, const Tokenizer& tok, const ThinkTokens& think);

class StructuredOutput {
 public:
  StructuredOutput(const Tokenizer& tok, int vocab, std::vector<int32_t> stop_ids, ThinkTokens think);

  // response_format {"type": "json_object"} or {"type": "json_schema", ...} (shape already
  // checked by openai_protocol); ApiError 400 naming response_format for a schema the grammar
  // compiler refuses. Reasoning is left free; the grammar starts after </think>.
  std::shared_ptr<TokenConstraint> for_response_format(const nlohmann::ordered_json& rf, ReasoningStart r);
  // The output must be a tool call (tool_choice "required": any of the tools; named: that
  // one), in the template's form, then end.
  std::shared_ptr<TokenConstraint> for_tool_call(const ForcedToolCall& f, ReasoningStart r);

  // tool_choice "auto": the answer is free until it writes "<tool_call>", then that block is
  // decoded under the grammar of a call to one of the offered functions, then free again
  // (decoding/triggered_constraint.h). ApiError 400 naming tools for a parameters schema the
  // compiler refuses (the caller may then decode without it).
  std::shared_ptr<TokenConstraint> for_tool_trigger(const ForcedToolCall& f, ReasoningStart r);

  static constexpr size_t kCachedGrammars = 32;

 private:
  struct Compiled {
    std::shared_ptr<const Grammar> grammar;
    std::shared_ptr<MaskCache> masks;
  };
  // The cached grammar built from `key`, or `build` run and cached (least recently used out).
  template <class Build>
  Compiled compiled(const std::string& key, Build build);
  std::shared_ptr<TokenConstraint> constraint(const Compiled& c, ReasoningStart r);
  Compiled call_grammar(const ForcedToolCall& f, bool open, bool repeat);
  const std::shared_ptr<const TokenTable>& table();

  const Tokenizer& tok_;
  int vocab_;
  std::vector<int32_t> stop_ids_;
  ThinkTokens think_;
  std::mutex mu_;
  std::shared_ptr<const TokenTable> table_;
  std::list<std::pair<std::string, Compiled>> cache_;  // most recent first
};

}  // namespace dflash::server
