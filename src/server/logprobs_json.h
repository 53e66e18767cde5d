#pragma once
// The `logprobs` objects of responses and stream chunks, in OpenAI's two shapes: chat's
// {"content": [{token, logprob, bytes, top_logprobs}]} and legacy completions' parallel lists
// {tokens, token_logprobs, top_logprobs, text_offset}. The numbers come from the generator
// (decoding/logprobs.h); this only names tokens and lays them out.
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "decoding/logprobs.h"
#include "tokenizer/tokenizer.h"

namespace dflash::server {

// A token's text as the API names it: its bytes when they are valid UTF-8, else (a piece of
// a multi-byte character) "bytes:\xe2\x80" with each byte spelled out, as OpenAI does; the
// raw bytes are in the entry's `bytes` either way.
std::string token_label(const std::string& bytes);

// Chat: {"content": [...]} for `entries`; each entry's top_logprobs holds the requested
// alternatives (possibly none), the chosen token being reported in the entry itself.
nlohmann::ordered_json chat_logprobs_json(const Tokenizer& tok, const std::vector<TokenLogprobs>& entries);

// Legacy completions. `text_offset` is where the first entry's text starts in the completion,
// counted in Unicode characters (code points whose first byte comes earlier); it is advanced
// past the entries, so a stream's chunks continue the count. Each top_logprobs dict holds the
// alternatives and, as OpenAI's does, the chosen token when it is not among them.
nlohmann::ordered_json completion_logprobs_json(const Tokenizer& tok, const std::vector<TokenLogprobs>& entries,
                                                long long& text_offset);

}  // namespace dflash::server
