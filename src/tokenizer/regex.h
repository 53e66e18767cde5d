#pragma once
// PCRE2 (JIT) standing in for Oniguruma, the engine Hugging Face compiles Split patterns with.
// Both are backtracking engines with the same leftmost-first alternation, so the match sequence
// is the same once the few escapes whose meaning differs are rewritten (see regex.cpp).
#include <cstddef>
#include <functional>
#include <string>
#include <string_view>

namespace dflash::tok {

class Regex {
 public:
  // origin names the file in error messages.
  Regex(std::string_view oniguruma_pattern, const std::string& origin);
  ~Regex();
  Regex(const Regex&) = delete;
  Regex& operator=(const Regex&) = delete;

  // Calls on_match(start, end) for every match in order, with the empty-match rule of the
  // onig crate's find_iter (an empty match right where the previous match ended is skipped and
  // the search moves on one character), so splits agree with Hugging Face even then.
  // text must be valid UTF-8.
  void for_each_match(std::string_view text,
                      const std::function<void(size_t, size_t)>& on_match) const;

 private:
  void* code_ = nullptr;  // pcre2_code_8*
  bool jit_ = false;
  std::string origin_;
};

// Oniguruma (Ruby syntax) -> PCRE2: \s/\S become Unicode White_Space (PCRE2 also counts
// U+180E), \h/\H hex digits, \w/\W Oniguruma's word class, \uHHHH -> \x{HHHH}. Exposed for tests.
std::string oniguruma_to_pcre2(std::string_view pattern, const std::string& origin);

}  // namespace dflash::tok
