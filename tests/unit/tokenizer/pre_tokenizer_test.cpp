// Split behaviours, the Oniguruma -> PCRE2 rewrite and the empty-match rule.
#include <gtest/gtest.h>

#include "tokenizer/pre_tokenizer.h"
#include "tokenizer/regex.h"

namespace {

using dflash::tok::Regex;
using dflash::tok::SplitBehavior;
using dflash::tok::SplitStep;
using Pieces = std::vector<std::string>;

Pieces split(const SplitStep& step, std::string_view text) {
  Pieces out;
  step.split(text, [&](std::string_view p) { out.emplace_back(p); });
  return out;
}

Pieces split_literal(const char* sep, SplitBehavior b, bool invert, std::string_view text) {
  return split(SplitStep(std::string(sep), b, invert), text);
}

Pieces split_regex(const char* re, SplitBehavior b, bool invert, std::string_view text) {
  return split(SplitStep(std::make_unique<Regex>(re, "test"), b, invert), text);
}

// The examples of Hugging Face's SplitDelimiterBehavior documentation.
TEST(TokenizerSplit, Behaviors) {
  const char* s = "the-final--countdown";
  EXPECT_EQ(split_literal("-", SplitBehavior::Removed, false, s),
            (Pieces{"the", "final", "countdown"}));
  EXPECT_EQ(split_literal("-", SplitBehavior::Isolated, false, s),
            (Pieces{"the", "-", "final", "-", "-", "countdown"}));
  EXPECT_EQ(split_literal("-", SplitBehavior::MergedWithPrevious, false, s),
            (Pieces{"the-", "final-", "-", "countdown"}));
  EXPECT_EQ(split_literal("-", SplitBehavior::MergedWithNext, false, s),
            (Pieces{"the", "-final", "-", "-countdown"}));
  EXPECT_EQ(split_literal("-", SplitBehavior::Contiguous, false, s),
            (Pieces{"the", "-", "final", "--", "countdown"}));
}

TEST(TokenizerSplit, Invert) {
  // Inverted, the pattern describes the pieces and the rest is what gets removed or merged.
  EXPECT_EQ(split_regex("[a-z]+", SplitBehavior::Removed, true, "ab, cd!"), (Pieces{"ab", "cd"}));
  EXPECT_EQ(split_regex("[a-z]+", SplitBehavior::Isolated, true, "ab, cd!"),
            (Pieces{"ab", ", ", "cd", "!"}));
  EXPECT_EQ(split_regex("[a-z]+", SplitBehavior::MergedWithPrevious, true, "ab, cd!"),
            (Pieces{"ab, ", "cd!"}));
}

TEST(TokenizerSplit, EmptyMatchesSplitLikeOniguruma) {
  EXPECT_EQ(split_regex("x*", SplitBehavior::Isolated, false, "ab"), (Pieces{"a", "b"}));
  EXPECT_EQ(split_regex("x*", SplitBehavior::Isolated, false, "xab"), (Pieces{"x", "a", "b"}));
  std::vector<std::pair<size_t, size_t>> m;
  Regex("x*", "test").for_each_match("xa", [&](size_t s, size_t e) { m.emplace_back(s, e); });
  EXPECT_EQ(m, (std::vector<std::pair<size_t, size_t>>{{0, 1}, {2, 2}}));
}

TEST(TokenizerRegex, WhiteSpaceIsUnicodeWhiteSpace) {
  auto count = [](const char* re, std::string_view text) {
    int n = 0;
    Regex(re, "test").for_each_match(text, [&](size_t, size_t) { ++n; });
    return n;
  };
  EXPECT_EQ(count(R"(\s)", "\xC2\x85"), 1);      // U+0085 NEL is White_Space
  EXPECT_EQ(count(R"(\s)", "\xE3\x80\x80"), 1);  // U+3000
  EXPECT_EQ(count(R"(\s)", "\xE1\xA0\x8E"), 0);  // U+180E is not (PCRE2's own \s says yes)
  EXPECT_EQ(count(R"(\S)", "\xE1\xA0\x8E"), 1);
  EXPECT_EQ(count(R"([^\s\p{L}])", "\xE1\xA0\x8E"), 1);
  EXPECT_EQ(count(R"(\h+)", "0fAz"), 1);         // Oniguruma \h: hex digits
  EXPECT_EQ(count(R"(\u00e9)", "\xC3\xA9"), 1);
  EXPECT_EQ(count(R"((?i:'s))", "'S"), 1);
}

TEST(TokenizerRegex, QwenPatternSplitsLikeHuggingFace) {
  const char* qwen =
      R"((?i:'s|'t|'re|'ve|'m|'ll|'d)|[^\r\n\p{L}\p{N}]?\p{L}+|\p{N}| ?[^\s\p{L}\p{N}]+[\r\n]*|\s*[\r\n]+|\s+(?!\S)|\s+)";
  EXPECT_EQ(split_regex(qwen, SplitBehavior::Isolated, false, "Hello world, it'S 123  ok\r\n\r\n x"),
            (Pieces{"Hello", " world", ",", " it", "'S", " ", "1", "2", "3", " ", " ok", "\r\n\r\n",
                    " x"}));
}

TEST(TokenizerRegex, RejectsWhatPcre2CannotMean) {
  EXPECT_THROW(Regex("[a[b]]", "f.json"), std::exception);
  EXPECT_THROW(Regex("[a&&b]", "f.json"), std::exception);
  EXPECT_THROW(Regex(R"([\H])", "f.json"), std::exception);
}

}  // namespace
