// Encode / decode behaviour on a tokenizer.json small enough to reason about by hand.
#include <gtest/gtest.h>

#include <atomic>
#include <thread>

#include "tiny_tokenizer.h"
#include "tokenizer/tokenizer.h"

namespace {

using dflash::StreamDecoder;
using dflash::Tokenizer;
using Ids = std::vector<int32_t>;

Tokenizer tiny_tok(const nlohmann::json& tj = tiny::tokenizer_json()) {
  return Tokenizer::from_json(tj.dump(), tiny::config_json().dump(), "tiny/tokenizer.json");
}

TEST(TinyTokenizer, MergesApplyInRankOrder) {
  const Tokenizer tok = tiny_tok();
  EXPECT_EQ(tok.encode("hello"), (Ids{259}));
  // (h,e) outranks ( ,h), so " hello" ends as " " + "hello", never " h" + ...
  EXPECT_EQ(tok.encode(" hello"), (Ids{32, 259}));
  EXPECT_EQ(tok.encode("ell"), (Ids{'e', 257}));
  EXPECT_EQ(tok.encode("abc"), (Ids{261, 'c'}));
  EXPECT_EQ(tok.encode("ababab"), (Ids{261, 261, 261}));
  EXPECT_EQ(tok.encode(""), Ids{});
}

TEST(TinyTokenizer, BothMergeFormsGiveTheSameIds) {
  const Tokenizer pairs = tiny_tok(tiny::tokenizer_json(false));
  const Tokenizer strings = tiny_tok(tiny::tokenizer_json(true));
  for (const char* s : {"hello", " hello world", "abcab hell", "x\n\ny"}) {
    EXPECT_EQ(pairs.encode(s), strings.encode(s)) << s;
  }
}

TEST(TinyTokenizer, IgnoreMergesEmitsVocabWordsWhole) {
  auto tj = tiny::tokenizer_json();
  tj["model"]["ignore_merges"] = true;
  const Tokenizer tok = tiny_tok(tj);
  EXPECT_EQ(tok.encode("abc"), (Ids{264}));
  EXPECT_EQ(tok.encode("ello"), (Ids{262}));
  EXPECT_EQ(tok.encode(" hello"), (Ids{263}));
  EXPECT_EQ(tok.encode("abd"), (Ids{261, 'd'}));  // not a vocab word: merges as usual
}

TEST(TinyTokenizer, AddedTokensAreSplitOutOfTheRawText) {
  const Tokenizer tok = tiny_tok();
  EXPECT_EQ(tok.encode("hi<|end|>hello"), (Ids{'h', 'i', 400, 259}));
  EXPECT_EQ(tok.encode("<think>hello</think>"),
            (Ids{401, 259, '<', '/', 't', 'h', 'i', 'n', 'k', '>'}));
  // Longest match wins at the leftmost position.
  EXPECT_EQ(tok.encode("axy!b"), (Ids{'a', 405, 'b'}));
  EXPECT_EQ(tok.encode("axyb"), (Ids{'a', 406, 'b'}));
}

TEST(TinyTokenizer, ParseSpecialFalseKeepsSpecialTokensAsText) {
  const Tokenizer tok = tiny_tok();
  const Ids ids = tok.encode("<|end|><think>", false);
  EXPECT_EQ(ids, (Ids{'<', '|', 'e', 'n', 'd', '|', '>', 401}));  // non-special still split out
  EXPECT_EQ(tok.decode(ids), "<|end|><think>");
}

TEST(TinyTokenizer, LstripRstripSwallowWhitespace) {
  const Tokenizer tok = tiny_tok();
  EXPECT_EQ(tok.encode("a \t[MASK]  \nb"), (Ids{'a', 402, 'b'}));
  EXPECT_EQ(tok.encode("[MASK]"), (Ids{402}));
}

TEST(TinyTokenizer, SingleWordNeedsWordBoundaries) {
  const Tokenizer tok = tiny_tok();
  EXPECT_EQ(tok.encode("ony"), (Ids{403}));
  EXPECT_EQ(tok.encode("a ony."), (Ids{'a', ' ', 403, '.'}));
  EXPECT_EQ(tok.encode("pony"), (Ids{'p', 'o', 'n', 'y'}));
  EXPECT_EQ(tok.encode("onyx"), (Ids{'o', 'n', 'y', 'x'}));
}

TEST(TinyTokenizer, NfcRunsBeforeTheModel) {
  const Tokenizer tok = tiny_tok();
  EXPECT_EQ(tok.encode("e\xCC\x81"), (Ids{0xC3, 0xA9}));  // e + U+0301 -> U+00E9
  EXPECT_EQ(tok.decode(tok.encode("e\xCC\x81")), "\xC3\xA9");
}

TEST(TinyTokenizer, InvalidUtf8InputIsReadLossily) {
  const Tokenizer tok = tiny_tok();
  EXPECT_EQ(tok.decode(tok.encode("a\xFF" "b")), "a\xEF\xBF\xBD" "b");
}

TEST(TinyTokenizer, DecodeAndSkipSpecial) {
  const Tokenizer tok = tiny_tok();
  const Ids ids = tok.encode("<s>hello<|end|><think>");
  EXPECT_EQ(tok.decode(ids), "<s>hello<|end|><think>");
  EXPECT_EQ(tok.decode(ids, true), "hello<think>");
  EXPECT_EQ(tok.decode({0xF0, 0x9F}), "\xEF\xBF\xBD");  // incomplete UTF-8 -> U+FFFD
  EXPECT_EQ(tok.decode({99999}), "");                  // unknown ids add nothing
  EXPECT_EQ(tok.token_bytes(32), " ");
  EXPECT_EQ(tok.token_bytes(400), "<|end|>");
  EXPECT_EQ(tok.token_bytes(-1), "");
}

TEST(TinyTokenizer, LookupsAndConfig) {
  const Tokenizer tok = tiny_tok();
  EXPECT_EQ(tok.vocab_size(), 407);
  EXPECT_EQ(tok.token_to_id("<think>"), 401);
  EXPECT_EQ(tok.token_to_id(tiny::t(" hello")), 263);  // vocab text, as in Hugging Face
  EXPECT_EQ(tok.token_to_id("nope nope"), std::nullopt);
  EXPECT_TRUE(tok.is_special(400));
  EXPECT_FALSE(tok.is_special(401));
  EXPECT_FALSE(tok.is_special(32));
  EXPECT_EQ(tok.special().bos, 404);
  EXPECT_EQ(tok.special().eos, (Ids{400}));
  EXPECT_EQ(tok.special().pad, std::nullopt);
  EXPECT_TRUE(tok.special().add_bos);
  EXPECT_EQ(tok.chat_template(), "D");
}

TEST(TinyTokenizer, NoConfigMeansNoSpecials) {
  const Tokenizer tok = Tokenizer::from_json(tiny::tokenizer_json().dump(), "");
  EXPECT_EQ(tok.special().bos, std::nullopt);
  EXPECT_TRUE(tok.special().eos.empty());
  EXPECT_FALSE(tok.special().add_bos);
  EXPECT_EQ(tok.chat_template(), "");
}

TEST(TinyTokenizer, StreamDecoderHoldsBackSplitCharacters) {
  const Tokenizer tok = tiny_tok();
  StreamDecoder dec(tok);
  // U+1F916 is F0 9F A4 96: one byte token each.
  EXPECT_EQ(dec.push(259), "hello");
  EXPECT_EQ(dec.push(0xF0), "");
  EXPECT_EQ(dec.push(0x9F), "");
  EXPECT_EQ(dec.push(0xA4), "");
  EXPECT_EQ(dec.push(0x96), "\xF0\x9F\xA4\x96");
  EXPECT_EQ(dec.push(' '), " ");
  EXPECT_EQ(dec.flush(), "");
  // A byte that can never start a character is not held back.
  EXPECT_EQ(dec.push(0x80), "\xEF\xBF\xBD");
  // An unfinished character at the end is replaced on flush.
  EXPECT_EQ(dec.push(0xE2), "");
  EXPECT_EQ(dec.push(0x82), "");
  EXPECT_EQ(dec.flush(), "\xEF\xBF\xBD");
  EXPECT_EQ(dec.flush(), "");
}

TEST(TinyTokenizer, StreamDecoderSkipsSpecial) {
  const Tokenizer tok = tiny_tok();
  StreamDecoder dec(tok, /*skip_special=*/true);
  EXPECT_EQ(dec.push(404), "");
  EXPECT_EQ(dec.push(401), "<think>");
  StreamDecoder keep(tok);
  EXPECT_EQ(keep.push(404), "<s>");
}

TEST(TinyTokenizer, PrefixSpaceAndMovedTokenizer) {
  auto tj = tiny::tokenizer_json();
  tj["pre_tokenizer"]["add_prefix_space"] = true;
  Tokenizer tok = tiny_tok(tj);
  EXPECT_EQ(tok.encode("hello"), (Ids{32, 259}));
  EXPECT_EQ(tok.encode(" hello"), (Ids{32, 259}));
  Tokenizer moved = std::move(tok);
  EXPECT_EQ(moved.encode("hello<|end|>hello"), (Ids{32, 259, 400, 32, 259}));
}

TEST(TinyTokenizer, ConcurrentEncodesAgree) {
  // The server encodes from several threads: the word cache and regex state must cope.
  const Tokenizer tok = tiny_tok();
  std::vector<std::string> texts;
  for (int i = 0; i < 200; ++i) {
    texts.push_back("hello " + std::to_string(i) + " abab<|end|>hell" + std::string(i % 7, 'l'));
  }
  std::vector<Ids> want;
  for (const auto& t : texts) want.push_back(tok.encode(t));
  std::vector<std::thread> threads;
  std::atomic<int> mismatches{0};
  for (int k = 0; k < 4; ++k) {
    threads.emplace_back([&] {
      for (int round = 0; round < 20; ++round) {
        for (size_t i = 0; i < texts.size(); ++i) {
          if (tok.encode(texts[i]) != want[i]) ++mismatches;
        }
      }
    });
  }
  for (auto& t : threads) t.join();
  EXPECT_EQ(mismatches.load(), 0);
}

}  // namespace
