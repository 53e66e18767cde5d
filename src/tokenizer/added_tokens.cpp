#include "tokenizer/added_tokens.h"

#include <algorithm>

#include "tokenizer/regex.h"
#include "tokenizer/utf8.h"

namespace dflash::tok {
namespace {

// Rust regex's \s (Unicode White_Space), which Hugging Face strips for lstrip/rstrip.
bool is_white_space(uint32_t c) {
  return (c >= 0x09 && c <= 0x0D) || c == 0x20 || c == 0x85 || c == 0xA0 || c == 0x1680 ||
         (c >= 0x2000 && c <= 0x200A) || c == 0x2028 || c == 0x2029 || c == 0x202F ||
         c == 0x205F || c == 0x3000;
}

// Rust regex's Unicode \w, which single_word tests on the neighbouring characters.
bool is_word_char(std::string_view one_char) {
  static const Regex word(R"(^[\p{Alphabetic}\p{M}\p{Nd}\p{Pc}\x{200C}\x{200D}])", "<builtin>");
  bool hit = false;
  word.for_each_match(one_char, [&](size_t, size_t) { hit = true; });
  return hit;
}

// Start of the last code point of s (s valid UTF-8, not empty).
size_t last_char_start(std::string_view s) {
  size_t i = s.size() - 1;
  while (i > 0 && (static_cast<uint8_t>(s[i]) & 0xC0) == 0x80) --i;
  return i;
}

// Where the whitespace run ending s begins.
size_t trailing_space_start(std::string_view s) {
  size_t end = s.size();
  while (end > 0) {
    const size_t b = last_char_start(s.substr(0, end));
    size_t j = b;
    if (!is_white_space(next_code_point(s, j))) break;
    end = b;
  }
  return end;
}

// Length of the whitespace run starting s.
size_t leading_space_length(std::string_view s) {
  size_t i = 0;
  while (i < s.size()) {
    size_t j = i;
    if (!is_white_space(next_code_point(s, j))) break;
    i = j;
  }
  return i;
}

}  // namespace

void AddedTokenMatcher::add(std::string pattern, const AddedToken* token) {
  if (pattern.empty()) return;  // Hugging Face ignores empty added tokens
  int32_t node = 0;
  for (char ch : pattern) {
    const auto c = static_cast<uint8_t>(ch);
    auto& kids = nodes_[node].children;
    auto it = std::find_if(kids.begin(), kids.end(), [c](const auto& k) { return k.first == c; });
    if (it != kids.end()) {
      node = it->second;
    } else {
      const auto child = static_cast<int32_t>(nodes_.size());
      kids.emplace_back(c, child);
      nodes_.emplace_back();
      node = child;
    }
  }
  first_byte_[static_cast<uint8_t>(pattern[0])] = true;
  if (nodes_[node].pattern >= 0) {
    patterns_[nodes_[node].pattern].token = token;  // a later duplicate replaces the earlier one
    return;
  }
  nodes_[node].pattern = static_cast<int32_t>(patterns_.size());
  patterns_.push_back({std::move(pattern), token});
}

int32_t AddedTokenMatcher::longest_at(std::string_view text, size_t at, size_t& len) const {
  int32_t node = 0, best = -1;
  for (size_t j = at; j < text.size(); ++j) {
    const auto c = static_cast<uint8_t>(text[j]);
    const auto& kids = nodes_[node].children;
    auto it = std::find_if(kids.begin(), kids.end(), [c](const auto& k) { return k.first == c; });
    if (it == kids.end()) break;
    node = it->second;
    if (nodes_[node].pattern >= 0) {
      best = nodes_[node].pattern;
      len = j + 1 - at;
    }
  }
  return best;
}

void AddedTokenMatcher::split(std::string_view text, bool parse_special,
                              const std::function<void(std::string_view)>& on_text,
                              const std::function<void(int32_t)>& on_token) const {
  size_t done = 0;  // text before this is already handed out
  size_t i = 0;
  while (i < text.size()) {
    if (!first_byte_[static_cast<uint8_t>(text[i])]) {
      ++i;
      continue;
    }
    size_t len = 0;
    const int32_t p = longest_at(text, i, len);
    if (p < 0) {
      ++i;
      continue;
    }
    size_t start = i, stop = i + len;
    i = stop;  // the search resumes after the match even when the match is discarded below
    const AddedToken& tok = *patterns_[p].token;
    if (!parse_special && tok.special) continue;
    if (tok.single_word) {
      const bool word_before =
          start > 0 && is_word_char(text.substr(last_char_start(text.substr(0, start))));
      const bool word_after =
          stop < text.size() && is_word_char(text.substr(stop, utf8_step(text, stop).len));
      if (word_before || word_after) continue;
    }
    if (tok.lstrip) start = std::max(trailing_space_start(text.substr(0, start)), done);
    if (tok.rstrip) stop += leading_space_length(text.substr(stop));
    if (stop <= done) continue;  // swallowed by the previous token's rstrip
    start = std::max(start, done);
    if (done < start) on_text(text.substr(done, start - done));
    on_token(tok.id);
    done = stop;
  }
  if (done < text.size()) on_text(text.substr(done));
}

}  // namespace dflash::tok
