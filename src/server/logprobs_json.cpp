#include "server/logprobs_json.h"

#include <cmath>
#include <cstdio>

#include "tokenizer/utf8.h"

namespace dflash::server {

using ojson = nlohmann::ordered_json;

namespace {

// JSON has no -inf (a token the model rules out entirely); OpenAI reports -9999.0 there.
constexpr double kFloorLogprob = -9999.0;
double json_logprob(double x) { return std::isfinite(x) ? x : kFloorLogprob; }

ojson byte_list(const std::string& bytes) {
  ojson out = ojson::array();
  for (unsigned char c : bytes) out.push_back(int(c));
  return out;
}

// Code points that start in `bytes`: every byte that is not a UTF-8 continuation byte.
long long char_starts(const std::string& bytes) {
  long long n = 0;
  for (unsigned char c : bytes) n += (c & 0xC0) != 0x80;
  return n;
}

}  // namespace

std::string token_label(const std::string& bytes) {
  if (tok::is_valid_utf8(bytes)) return bytes;
  std::string out = "bytes:";
  char hex[5];
  for (unsigned char c : bytes) {
    std::snprintf(hex, sizeof hex, "\\x%02x", unsigned(c));
    out += hex;
  }
  return out;
}

ojson chat_logprobs_json(const Tokenizer& tok, const std::vector<TokenLogprobs>& entries) {
  auto item = [&](const TokenProb& p) {
    const std::string bytes = tok.token_bytes(p.id);
    return ojson{{"token", token_label(bytes)}, {"logprob", json_logprob(p.logprob)}, {"bytes", byte_list(bytes)}};
  };
  ojson content = ojson::array();
  for (const TokenLogprobs& e : entries) {
    ojson entry = item(e.chosen);
    ojson top = ojson::array();
    for (const TokenProb& t : e.top) top.push_back(item(t));
    entry["top_logprobs"] = std::move(top);
    content.push_back(std::move(entry));
  }
  return ojson{{"content", std::move(content)}};
}

ojson completion_logprobs_json(const Tokenizer& tok, const std::vector<TokenLogprobs>& entries,
                               long long& text_offset) {
  ojson tokens = ojson::array(), token_logprobs = ojson::array(), top_logprobs = ojson::array(),
        offsets = ojson::array();
  for (const TokenLogprobs& e : entries) {
    const std::string bytes = tok.token_bytes(e.chosen.id);
    const std::string label = token_label(bytes);
    tokens.push_back(label);
    token_logprobs.push_back(json_logprob(e.chosen.logprob));
    offsets.push_back(text_offset);
    text_offset += char_starts(bytes);
    // A dict keeps one value per name: where two ids share a text, the likelier one stays.
    ojson top = ojson::object();
    for (const TokenProb& t : e.top) {
      const std::string name = token_label(tok.token_bytes(t.id));
      if (!top.contains(name)) top[name] = json_logprob(t.logprob);
    }
    if (!top.contains(label)) top[label] = json_logprob(e.chosen.logprob);
    top_logprobs.push_back(std::move(top));
  }
  return ojson{{"tokens", std::move(tokens)},
               {"token_logprobs", std::move(token_logprobs)},
               {"top_logprobs", std::move(top_logprobs)},
               {"text_offset", std::move(offsets)}};
}

}  // namespace dflash::server
