// Qwen3.5's pre-tokenizer (llama.cpp "qwen35"): Qwen2's Split regex with combining marks kept in
// letter runs and out of punctuation runs; from tokenizer.json and from a GGUF vocabulary.
//
// Every expected pre-token list below was derived by hand from the regex and then checked with
// Python's `regex` module (python3-regex 2026.5.9: regex.findall(pattern, text)), which agrees
// with Oniguruma on these patterns.
#include <gtest/gtest.h>

#include "tiny_tokenizer.h"
#include "tokenizer/gguf_vocab.h"
#include "tokenizer/pre_tokenizer.h"
#include "tokenizer/regex.h"
#include "tokenizer/tokenizer.h"
#include "util/error.h"

namespace {

using dflash::Tokenizer;
using dflash::VocabSpec;
using dflash::tok::Regex;
using dflash::tok::SplitBehavior;
using dflash::tok::SplitStep;
using Ids = std::vector<int32_t>;
using Pieces = std::vector<std::string>;

// The patterns as tokenizer.json spells them (GGUF pre qwen2 and qwen35).
std::string pattern_of(const std::string& pre) {
  std::string regex;
  bool nfc = false, ignore_merges = false;
  EXPECT_TRUE(dflash::vocab_pre_tokenizer(pre, regex, nfc, ignore_merges)) << pre;
  return regex;
}

Pieces split(const std::string& pre, std::string_view text) {
  const SplitStep step(std::make_unique<Regex>(pattern_of(pre), "test"), SplitBehavior::Isolated, false);
  Pieces out;
  step.split(text, [&](std::string_view p) { out.emplace_back(p); });
  return out;
}

// U+0301 COMBINING ACUTE ACCENT (Mn).
#define ACUTE "\xCC\x81"

TEST(Qwen35PreTokenizer, PatternsAreTheDocumentedOnes) {
  EXPECT_EQ(pattern_of("qwen35"),
            R"((?i:'s|'t|'re|'ve|'m|'ll|'d)|[^\r\n\p{L}\p{N}]?[\p{L}\p{M}]+|\p{N}| ?[^\s\p{L}\p{M}\p{N}]+[\r\n]*|\s*[\r\n]+|\s+(?!\S)|\s+)");
  // \p{M} survives the Oniguruma -> PCRE2 rewrite in a class and in a negated class, next to
  // the expanded \s.
  const std::string pcre = dflash::tok::oniguruma_to_pcre2(pattern_of("qwen35"), "test");
  EXPECT_NE(pcre.find(R"([\p{L}\p{M}]+)"), std::string::npos) << pcre;
  EXPECT_NE(pcre.find(R"(\p{L}\p{M}\p{N}]+)"), std::string::npos) << pcre;
}

TEST(Qwen35PreTokenizer, MarkClassesMatchMarks) {
  auto matches = [](const char* re, std::string_view text) {
    Pieces out;
    Regex(re, "test").for_each_match(text, [&](size_t s, size_t e) { out.emplace_back(text.substr(s, e - s)); });
    return out;
  };
  EXPECT_EQ(matches(R"([\p{L}\p{M}]+)", "e" ACUTE "cole!"), (Pieces{"e" ACUTE "cole"}));
  EXPECT_EQ(matches(R"([^\s\p{L}\p{M}\p{N}]+)", "!" ACUTE "? x"), (Pieces{"!", "?"}));
  EXPECT_EQ(matches(R"([^\s\p{L}\p{N}]+)", "!" ACUTE "? x"), (Pieces{"!" ACUTE "?"}));
}

TEST(Qwen35PreTokenizer, LettersKeepTheirCombiningMarks) {
  // Decomposed "école": Qwen2/3 cut the mark off the e and glue it to "cole" as a prefix.
  EXPECT_EQ(split("qwen2", "e" ACUTE "cole"), (Pieces{"e", ACUTE "cole"}));
  EXPECT_EQ(split("qwen35", "e" ACUTE "cole"), (Pieces{"e" ACUTE "cole"}));
  // Devanagari "नमस्ते": virama U+094D and vowel sign E U+0947 are Mn.
  const std::string namaste = "\xE0\xA4\xA8\xE0\xA4\xAE\xE0\xA4\xB8\xE0\xA5\x8D\xE0\xA4\xA4\xE0\xA5\x87";
  EXPECT_EQ(split("qwen2", namaste),
            (Pieces{"\xE0\xA4\xA8\xE0\xA4\xAE\xE0\xA4\xB8",  // नमस
                    "\xE0\xA5\x8D\xE0\xA4\xA4",              // ्त
                    "\xE0\xA5\x87"}));                        // े (alone: a punctuation run)
  EXPECT_EQ(split("qwen35", namaste), (Pieces{namaste}));
  // Thai "สวัสดีครับ": U+0E31 and U+0E35 are Mn.
  const std::string sawasdee_khrap =
      "\xE0\xB8\xAA\xE0\xB8\xA7\xE0\xB8\xB1\xE0\xB8\xAA\xE0\xB8\x94\xE0\xB8\xB5\xE0\xB8\x84\xE0\xB8\xA3\xE0\xB8\xB1"
      "\xE0\xB8\x9A";
  EXPECT_EQ(split("qwen2", sawasdee_khrap),
            (Pieces{"\xE0\xB8\xAA\xE0\xB8\xA7",                          // สว
                    "\xE0\xB8\xB1\xE0\xB8\xAA\xE0\xB8\x94",              // ัสด
                    "\xE0\xB8\xB5\xE0\xB8\x84\xE0\xB8\xA3",              // ีคร
                    "\xE0\xB8\xB1\xE0\xB8\x9A"}));                        // ับ
  EXPECT_EQ(split("qwen35", sawasdee_khrap), (Pieces{sawasdee_khrap}));
}

TEST(Qwen35PreTokenizer, MarksLeaveThePunctuationRun) {
  // Qwen2/3 count a mark as punctuation; Qwen3.5 ends the run before it, and the mark then
  // starts a letter piece (or stands alone).
  EXPECT_EQ(split("qwen2", "..." ACUTE), (Pieces{"..." ACUTE}));
  EXPECT_EQ(split("qwen35", "..." ACUTE), (Pieces{"...", ACUTE}));
  // One punctuation character may prefix a letter piece, which in Qwen3.5 may start with marks.
  EXPECT_EQ(split("qwen2", "a." ACUTE "b"), (Pieces{"a", "." ACUTE, "b"}));
  EXPECT_EQ(split("qwen35", "a." ACUTE "b"), (Pieces{"a", "." ACUTE "b"}));
  EXPECT_EQ(split("qwen2", "x" ACUTE "y x" ACUTE "."), (Pieces{"x", ACUTE "y", " x", ACUTE "."}));
  EXPECT_EQ(split("qwen35", "x" ACUTE "y x" ACUTE "."), (Pieces{"x" ACUTE "y", " x" ACUTE, "."}));
  // A lone mark is one piece under both.
  EXPECT_EQ(split("qwen2", ACUTE), (Pieces{ACUTE}));
  EXPECT_EQ(split("qwen35", ACUTE), (Pieces{ACUTE}));
}

TEST(Qwen35PreTokenizer, ContractionsDigitsAndWhitespaceAsQwen2) {
  for (const char* pre : {"qwen2", "qwen35"}) {
    EXPECT_EQ(split(pre, "I'LL DON'T we've They'RE"),
              (Pieces{"I", "'LL", " DON", "'T", " we", "'ve", " They", "'RE"}))
        << pre;
    // Every digit is its own piece, superscripts (No) and Arabic-Indic digits too.
    EXPECT_EQ(split(pre, "1234567890 x\xC2\xB2 \xD9\xA3\xD9\xA4"),
              (Pieces{"1", "2", "3", "4", "5", "6", "7", "8", "9", "0", " x", "\xC2\xB2", " ", "\xD9\xA3",
                      "\xD9\xA4"}))
        << pre;
    EXPECT_EQ(split(pre, "Hello world, it'S 123  ok\r\n\r\n x"),
              (Pieces{"Hello", " world", ",", " it", "'S", " ", "1", "2", "3", " ", " ok", "\r\n\r\n", " x"}))
        << pre;
  }
}

// The strings of llama-tokenize's oracle vectors (qwen35-format.md §4.1); the piece counts fit
// the id counts there (a piece is one or more ids).
TEST(Qwen35PreTokenizer, OracleStringsSplit) {
  EXPECT_EQ(split("qwen35", "transformers"), (Pieces{"transformers"}));
  EXPECT_EQ(split("qwen35", "\xE4\xBA\xBA\xE5\xB7\xA5\xE6\x99\xBA\xE8\x83\xBD"),  // 人工智能
            (Pieces{"\xE4\xBA\xBA\xE5\xB7\xA5\xE6\x99\xBA\xE8\x83\xBD"}));
  // สวัสดีครับ ผมชื่ออเล็กซ์: two words; Qwen2 would cut it into nine pieces.
  const std::string thai1 =
      "\xE0\xB8\xAA\xE0\xB8\xA7\xE0\xB8\xB1\xE0\xB8\xAA\xE0\xB8\x94\xE0\xB8\xB5\xE0\xB8\x84\xE0\xB8\xA3\xE0\xB8\xB1"
      "\xE0\xB8\x9A";
  const std::string thai2 =
      " \xE0\xB8\x9C\xE0\xB8\xA1\xE0\xB8\x8A\xE0\xB8\xB7\xE0\xB9\x88\xE0\xB8\xAD\xE0\xB8\xAD\xE0\xB9\x80\xE0\xB8\xA5"
      "\xE0\xB9\x87\xE0\xB8\x81\xE0\xB8\x8B\xE0\xB9\x8C";
  EXPECT_EQ(split("qwen35", thai1 + thai2), (Pieces{thai1, thai2}));
  EXPECT_EQ(split("qwen2", thai1 + thai2).size(), 9u);
  // 你好，世界！今天是2026年8月13日 🎉
  EXPECT_EQ(split("qwen35", "\xE4\xBD\xA0\xE5\xA5\xBD\xEF\xBC\x8C\xE4\xB8\x96\xE7\x95\x8C\xEF\xBC\x81\xE4\xBB\x8A"
                            "\xE5\xA4\xA9\xE6\x98\xAF" "2026\xE5\xB9\xB4" "8\xE6\x9C\x88" "13\xE6\x97\xA5 "
                            "\xF0\x9F\x8E\x89"),
            (Pieces{"\xE4\xBD\xA0\xE5\xA5\xBD",                          // 你好
                    "\xEF\xBC\x8C\xE4\xB8\x96\xE7\x95\x8C",              // ，世界
                    "\xEF\xBC\x81\xE4\xBB\x8A\xE5\xA4\xA9\xE6\x98\xAF",  // ！今天是
                    "2", "0", "2", "6", "\xE5\xB9\xB4", "8", "\xE6\x9C\x88", "1", "3", "\xE6\x97\xA5",
                    " \xF0\x9F\x8E\x89"}));
  EXPECT_EQ(split("qwen35", "<|im_start|>"), (Pieces{"<|", "im", "_start", "|>"}));
}

// A byte-level vocabulary (byte b has id b) with merges that only pay off when "x" and its
// combining acute stay in one piece.
VocabSpec mark_vocab(const std::string& pre) {
  VocabSpec v;
  v.model = "gpt2";
  v.pre = pre;
  for (int b = 0; b < 256; ++b) v.tokens.push_back(tiny::t(std::string(1, char(b))));
  const char* merged[][2] = {{"\xCC", "\x81"}, {"x", ACUTE}, {" ", "x"}, {"x" ACUTE, "y"}, {" ", "x" ACUTE}};
  for (const auto& m : merged) {
    v.tokens.push_back(tiny::t(std::string(m[0]) + m[1]));  // ids 256..260
    v.merges.push_back(tiny::t(m[0]) + " " + tiny::t(m[1]));
  }
  return v;
}

TEST(Qwen35PreTokenizer, GgufVocabEncodesMarksWithTheirLetters) {
  const Tokenizer q35 = Tokenizer::from_vocab(mark_vocab("qwen35"), "tiny.gguf");
  const Tokenizer q2 = Tokenizer::from_vocab(mark_vocab("qwen2"), "tiny.gguf");
  const std::string text = "x" ACUTE "y x" ACUTE ".";  // NFC leaves x + U+0301 alone
  // qwen35 pieces "x́y", " x́", "." -> 259, 260, '.'
  EXPECT_EQ(q35.encode(text), (Ids{259, 260, '.'}));
  // qwen2 pieces "x", "́y", " x", "́." -> 'x', 256 'y', 258, 256 '.'
  EXPECT_EQ(q2.encode(text), (Ids{'x', 256, 'y', 258, 256, '.'}));
  EXPECT_EQ(q35.decode(q35.encode(text)), text);
  EXPECT_EQ(q2.decode(q2.encode(text)), text);
}

TEST(Qwen35PreTokenizer, TokenizerJsonWithTheRegexMatchesTheGgufVocab) {
  // Qwen3.5's tokenizer.json layout: NFC, Split(regex, Isolated), ByteLevel without its regex.
  const VocabSpec v = mark_vocab("qwen35");
  nlohmann::json vocab = nlohmann::json::object(), merges = nlohmann::json::array();
  for (size_t id = 0; id < v.tokens.size(); ++id) vocab[v.tokens[id]] = id;
  for (const auto& m : v.merges) merges.push_back(m);
  auto tj = tiny::tokenizer_json();
  tj["added_tokens"] = nlohmann::json::array();
  tj["model"]["vocab"] = vocab;
  tj["model"]["merges"] = merges;
  tj["pre_tokenizer"] = {
      {"type", "Sequence"},
      {"pretokenizers",
       {{{"type", "Split"},
         {"pattern", {{"Regex", pattern_of("qwen35")}}},
         {"behavior", "Isolated"},
         {"invert", false}},
        {{"type", "ByteLevel"}, {"add_prefix_space", false}, {"trim_offsets", false}, {"use_regex", false}}}}};
  const Tokenizer from_json = Tokenizer::from_json(tj.dump(), "", "tiny/tokenizer.json");
  const Tokenizer from_gguf = Tokenizer::from_vocab(v, "tiny.gguf");
  for (const char* s : {"x" ACUTE "y x" ACUTE ".", "..." ACUTE "x", "e" ACUTE "cole 12 it's", "a." ACUTE "b"})
    EXPECT_EQ(from_json.encode(s), from_gguf.encode(s)) << s;
  EXPECT_EQ(from_json.encode("x" ACUTE "y x" ACUTE "."), (Ids{259, 260, '.'}));
}

TEST(Qwen35PreTokenizer, PreNameRoundTrips) {
  // tokenizer.json regex + NFC -> the name convert writes -> the regex a GGUF load uses.
  for (const char* pre : {"qwen2", "qwen35", "llama-bpe"}) {
    std::string regex;
    bool nfc = false, ignore_merges = false;
    ASSERT_TRUE(dflash::vocab_pre_tokenizer(pre, regex, nfc, ignore_merges)) << pre;
    EXPECT_EQ(dflash::vocab_pre_name(regex, nfc), pre);
  }
  // Qwen3.5's pattern without NFC is no pre-tokenizer llama.cpp knows.
  EXPECT_EQ(dflash::vocab_pre_name(pattern_of("qwen35"), false), "");
}

TEST(Qwen35PreTokenizer, UnknownPreListsQwen35) {
  try {
    Tokenizer::from_vocab(mark_vocab("falcon"), "tiny.gguf");
    FAIL() << "pre falcon loaded";
  } catch (const dflash::Error& e) {
    const std::string msg = e.what();
    EXPECT_NE(msg.find("'falcon' is not supported (supported: qwen2, qwen35, llama-bpe)"), std::string::npos)
        << msg;
  }
}

}  // namespace
