// The logprobs objects of responses (server/logprobs_json.h): chat's and legacy completions'
// shapes, token names for pieces of a UTF-8 character, the chosen token in the legacy dict,
// -inf, and text_offset continuing across a stream's chunks. The tiny tokenizer gives byte b
// the id b, so a lone 0xE2 is a token that is part of a character.
#include <gtest/gtest.h>

#include <cmath>
#include <vector>

#include "../tokenizer/tiny_tokenizer.h"
#include "server/logprobs_json.h"
#include "tokenizer/tokenizer.h"

namespace dflash::server {
namespace {

const Tokenizer& tokenizer() {
  static const Tokenizer tok = Tokenizer::from_json(tiny::tokenizer_json().dump(), tiny::config_json().dump());
  return tok;
}

constexpr int32_t kHello = 259, kE2 = 0xE2, k80 = 0x80, k99 = 0x99, kA = 'a', kB = 'b';

}  // namespace

TEST(LogprobsJson, TokenLabelSpellsOutBytesThatAreNotUtf8) {
  EXPECT_EQ("hello", token_label("hello"));
  EXPECT_EQ("\xE2\x80\x99", token_label("\xE2\x80\x99"));
  EXPECT_EQ("bytes:\\xe2\\x80", token_label("\xE2\x80"));
  EXPECT_EQ("bytes:\\x99", token_label("\x99"));
}

TEST(LogprobsJson, ChatEntriesCarryTokenLogprobBytesAndAlternatives) {
  std::vector<TokenLogprobs> e(2);
  e[0].chosen = {kHello, -0.25};
  e[0].top = {{kHello, -0.25}, {kA, -2.5}};
  e[1].chosen = {kE2, -1.0 / 3};
  e[1].top = {{kB, -0.125}, {kA, -INFINITY}};
  const auto j = chat_logprobs_json(tokenizer(), e);
  const auto& c = j["content"];
  ASSERT_EQ(2u, c.size());
  EXPECT_EQ("hello", c[0]["token"]);
  EXPECT_EQ(-0.25, c[0]["logprob"].get<double>());
  EXPECT_EQ((std::vector<int>{'h', 'e', 'l', 'l', 'o'}), c[0]["bytes"].get<std::vector<int>>());
  ASSERT_EQ(2u, c[0]["top_logprobs"].size());
  EXPECT_EQ("a", c[0]["top_logprobs"][1]["token"]);
  EXPECT_EQ(-2.5, c[0]["top_logprobs"][1]["logprob"].get<double>());
  EXPECT_EQ((std::vector<int>{'a'}), c[0]["top_logprobs"][1]["bytes"].get<std::vector<int>>());
  // A piece of a character: its raw byte, and a label that says so.
  EXPECT_EQ("bytes:\\xe2", c[1]["token"]);
  EXPECT_EQ((std::vector<int>{0xE2}), c[1]["bytes"].get<std::vector<int>>());
  // The chosen token is reported in the entry although it is not in the list; the value goes
  // out as the same double (the JSON writer round-trips doubles).
  EXPECT_EQ(-1.0 / 3, nlohmann::json::parse(nlohmann::json(c[1]).dump())["logprob"].get<double>());
  EXPECT_EQ(-9999.0, c[1]["top_logprobs"][1]["logprob"].get<double>()) << "-inf has no JSON form";
}

TEST(LogprobsJson, CompletionsListsDictsWithTheChosenTokenAndCharacterOffsets) {
  // "hello", then U+2019 in three byte tokens, then "a": offsets count code points.
  std::vector<TokenLogprobs> e(5);
  e[0].chosen = {kHello, -0.5};
  e[0].top = {{kHello, -0.5}, {kA, -1.5}};
  e[1].chosen = {kE2, -4.0};
  e[1].top = {{kA, -0.75}, {kB, -1.0}};  // the chosen token is not among them
  e[2].chosen = {k80, -0.0625};
  e[3].chosen = {k99, -0.03125};
  e[4].chosen = {kA, -2.0};
  long long offset = 0;
  const auto first = completion_logprobs_json(tokenizer(), {e.begin(), e.begin() + 2}, offset);
  const auto second = completion_logprobs_json(tokenizer(), {e.begin() + 2, e.end()}, offset);
  EXPECT_EQ((std::vector<std::string>{"hello", "bytes:\\xe2"}), first["tokens"].get<std::vector<std::string>>());
  EXPECT_EQ((std::vector<double>{-0.5, -4.0}), first["token_logprobs"].get<std::vector<double>>());
  EXPECT_EQ((std::vector<long long>{0, 5}), first["text_offset"].get<std::vector<long long>>());
  EXPECT_EQ((std::vector<long long>{6, 6, 6}), second["text_offset"].get<std::vector<long long>>())
      << "the continuation bytes start no character; the next chunk's count goes on from the last";
  EXPECT_EQ(7, offset);
  // Dicts: the alternatives in order, then the chosen token when it is not one of them.
  EXPECT_EQ(R"({"hello":-0.5,"a":-1.5})", first["top_logprobs"][0].dump());
  EXPECT_EQ(R"({"a":-0.75,"b":-1.0,"bytes:\\xe2":-4.0})", first["top_logprobs"][1].dump());
  EXPECT_EQ(R"({"bytes:\\x80":-0.0625})", second["top_logprobs"][0].dump()) << "logprobs 0: the chosen token only";
}

}  // namespace dflash::server
