#pragma once
// tokenizer.json "added_tokens": found in the text before the model sees it, leftmost-longest
// like Hugging Face's Aho-Corasick matcher, honouring single_word / lstrip / rstrip.
#include <array>
#include <cstdint>
#include <functional>
#include <string>
#include <string_view>
#include <vector>

namespace dflash::tok {

struct AddedToken {
  int32_t id = -1;
  std::string content;
  bool single_word = false;
  bool lstrip = false;
  bool rstrip = false;
  bool normalized = false;
  bool special = false;
};

class AddedTokenMatcher {
 public:
  // pattern is what is searched for: the content, or its normalized form for normalized tokens.
  void add(std::string pattern, const AddedToken* token);
  bool empty() const { return patterns_.empty(); }

  // Cuts text into plain pieces (on_text) and tokens (on_token). With parse_special false,
  // special tokens are left in the text (Hugging Face's split_special_tokens).
  void split(std::string_view text, bool parse_special,
             const std::function<void(std::string_view)>& on_text,
             const std::function<void(int32_t)>& on_token) const;

 private:
  struct Node {
    std::vector<std::pair<uint8_t, int32_t>> children;
    int32_t pattern = -1;
  };
  struct Pattern {
    std::string text;
    const AddedToken* token;
  };
  // Index of the longest pattern starting at text[at], -1 if none; sets len.
  int32_t longest_at(std::string_view text, size_t at, size_t& len) const;

  std::vector<Node> nodes_{Node{}};
  std::vector<Pattern> patterns_;
  std::array<bool, 256> first_byte_{};
};

}  // namespace dflash::tok
