// Encode / decode in Hugging Face's order: added tokens in the raw text, normalizer on each
// remaining piece, normalized added tokens, pre-tokenizer, BPE per word.
#include "tokenizer/tokenizer.h"

#include "tokenizer/tokenizer_impl.h"
#include "tokenizer/utf8.h"

namespace dflash {

Tokenizer::Tokenizer() : impl_(std::make_unique<Impl>()) {}
Tokenizer::~Tokenizer() = default;
Tokenizer::Tokenizer(Tokenizer&&) noexcept = default;
Tokenizer& Tokenizer::operator=(Tokenizer&&) noexcept = default;

void tok::TokenizerData::encode_section(std::string_view text, bool parse_special,
                                     std::vector<int32_t>& out) const {
  auto pre_tokenize = [&](std::string_view piece) {
    pre_tokenizer.split(piece, [&](std::string_view word) { model.encode_word(word, out); });
  };
  const std::string normalized = normalizer.empty() ? std::string() : normalizer.apply(text);
  const std::string_view norm = normalizer.empty() ? text : std::string_view(normalized);
  if (normalized_matcher.empty()) {
    pre_tokenize(norm);
  } else {
    normalized_matcher.split(norm, parse_special, pre_tokenize,
                             [&](int32_t id) { out.push_back(id); });
  }
}

std::vector<int32_t> Tokenizer::encode(std::string_view text, bool parse_special) const {
  // Hugging Face only ever sees valid UTF-8; invalid bytes become U+FFFD, as a lossy read would.
  std::string repaired;
  if (!tok::is_valid_utf8(text)) {
    repaired = tok::repair_utf8(text);
    text = repaired;
  }
  std::vector<int32_t> out;
  out.reserve(text.size() / 3 + 4);
  impl_->raw_matcher.split(
      text, parse_special,
      [&](std::string_view piece) { impl_->encode_section(piece, parse_special, out); },
      [&](int32_t id) { out.push_back(id); });
  return out;
}

std::string Tokenizer::token_bytes(int32_t id) const {
  if (const tok::AddedToken* t = impl_->added_token(id)) return t->content;
  return std::string(impl_->model.token_bytes(id));
}

std::string Tokenizer::decode(const std::vector<int32_t>& ids, bool skip_special) const {
  std::string bytes;
  for (int32_t id : ids) {
    if (const tok::AddedToken* t = impl_->added_token(id)) {
      if (!(skip_special && t->special)) bytes += t->content;
    } else {
      bytes += impl_->model.token_bytes(id);  // unknown ids add nothing, as in Hugging Face
    }
  }
  return tok::is_valid_utf8(bytes) ? bytes : tok::repair_utf8(bytes);
}

std::optional<int32_t> Tokenizer::token_to_id(std::string_view token) const {
  if (auto it = impl_->added_by_content.find(token); it != impl_->added_by_content.end()) {
    return it->second;
  }
  return impl_->model.id_of_text(token);
}

bool Tokenizer::is_special(int32_t id) const {
  const tok::AddedToken* t = impl_->added_token(id);
  return t && t->special;
}

int32_t Tokenizer::vocab_size() const { return impl_->vocab_size; }
const SpecialTokens& Tokenizer::special() const { return impl_->special; }
const std::string& Tokenizer::chat_template() const { return impl_->chat_template; }

std::string StreamDecoder::push(int32_t id) {
  if (skip_special_ && tok_.is_special(id)) return {};
  pending_ += tok_.token_bytes(id);
  std::string out;
  const size_t held = tok::append_complete_utf8(pending_, out);
  pending_.erase(0, pending_.size() - held);
  return out;
}

std::string StreamDecoder::flush() {
  std::string out = tok::repair_utf8(pending_);
  pending_.clear();
  return out;
}

}  // namespace dflash
