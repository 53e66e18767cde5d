#pragma once
// Which tokens a grammar allows next, as a bitset over the vocabulary.
//
// TokenTable (once per model) puts every token's bytes in a byte trie laid out in preorder, so
// tokens that share a prefix share the walk over it, and a dead prefix skips its whole
// subtree in one jump.
//
// A mask is one walk of that trie from the matcher's state. The walk does not run the matcher
// per node: it steps a lazily built DFA whose states are interned matcher states, so each
// (state, byte) pair is stepped once and every later visit is a table lookup. Inside a JSON
// string almost every token is allowed, yet the states involved are a handful ("in the
// string", "after a backslash", "inside a UTF-8 sequence"), so the walk over all ~150k tokens
// is array reads.
//
// MaskCache remembers masks by matcher state (the canonical state vector, hashed): a state
// seen before, in this request or any other with the same grammar and table, costs a lookup.
#include <cstdint>
#include <deque>
#include <memory>
#include <mutex>
#include <string>
#include <string_view>
#include <unordered_map>
#include <vector>

#include "decoding/grammar/grammar.h"

namespace dflash {

class Tokenizer;

class TokenTable {
 public:
  // token_bytes[id] = the bytes token `id` stands for. An empty string marks a token the
  // grammar never chooses (special/control tokens, ids the tokenizer does not know). The size
  // must be the model's logits vocabulary, so masks cover every logit.
  explicit TokenTable(const std::vector<std::string>& token_bytes);
  // From a tokenizer, over `vocab` ids (the model's logits vocabulary; ids the tokenizer does
  // not know and its special tokens get no bytes).
  static std::shared_ptr<const TokenTable> from_tokenizer(const Tokenizer& tok, int32_t vocab);

  int32_t vocab_size() const { return int32_t(offsets_.size() - 1); }
  size_t mask_words() const { return (size_t(vocab_size()) + 63) / 64; }
  std::string_view bytes(int32_t id) const {
    return std::string_view(data_).substr(offsets_[id], offsets_[id + 1] - offsets_[id]);
  }

  // The trie in preorder. Node i holds byte node_byte[i] at depth node_depth[i] (1 = first
  // byte); node_skip[i] is the first node after its subtree; the tokens whose bytes end at
  // node i are node_tokens[node_tok_begin[i] .. node_tok_begin[i + 1]).
  size_t node_count() const { return node_byte_.size(); }
  const std::vector<uint8_t>& node_byte() const { return node_byte_; }
  const std::vector<uint32_t>& node_depth() const { return node_depth_; }
  const std::vector<uint32_t>& node_skip() const { return node_skip_; }
  const std::vector<uint32_t>& node_tok_begin() const { return node_tok_begin_; }
  const std::vector<int32_t>& node_tokens() const { return node_tokens_; }
  uint32_t max_depth() const { return max_depth_; }

 private:
  std::string data_;
  std::vector<uint32_t> offsets_;
  std::vector<uint8_t> node_byte_;
  std::vector<uint32_t> node_depth_, node_skip_, node_tok_begin_;
  std::vector<int32_t> node_tokens_;
  uint32_t max_depth_ = 0;
};

// The interned-state DFA the trie walk steps (see the top of this file).
class LazyStateDfa {
 public:
  explicit LazyStateDfa(const Grammar& g);
  int32_t intern(const std::vector<uint32_t>& state);
  int32_t next(int32_t s, uint8_t b) {
    const int32_t t = trans_[size_t(s) * 256 + b];
    return t != kUnknown ? t : compute(s, b);
  }
  size_t state_count() const { return states_.size(); }
  void clear();
  static constexpr int32_t kDead = 0;  // the empty state is always interned first

 private:
  static constexpr int32_t kUnknown = -1;
  struct VecHash {
    size_t operator()(const std::vector<uint32_t>& v) const;
  };
  int32_t compute(int32_t s, uint8_t b);

  const Grammar& g_;
  std::vector<std::vector<uint32_t>> states_;
  std::unordered_map<std::vector<uint32_t>, int32_t, VecHash> ids_;
  std::vector<int32_t> trans_;
  std::vector<uint32_t> scratch_;
};

// The grammar's own mask at `state`: bit t set when token t's bytes can follow. Stop ids are
// not its business (GrammarConstraint adds them).
void compute_token_mask(const TokenTable& table, LazyStateDfa& dfa, const std::vector<uint32_t>& state,
                        std::vector<uint64_t>& mask);

// Masks by matcher state, shared by every constraint of one grammar and one token table
// (std::shared_ptr, thread-safe). Bounded: past `max_bytes` of masks the oldest are dropped.
class MaskCache {
 public:
  MaskCache(std::shared_ptr<const Grammar> grammar, std::shared_ptr<const TokenTable> table,
            size_t max_bytes = size_t(64) << 20);

  using Mask = std::shared_ptr<const std::vector<uint64_t>>;
  // The grammar's mask at `state` (computed on a miss); *hit says whether it was cached.
  Mask get(const std::vector<uint32_t>& state, bool* hit = nullptr);

  const std::shared_ptr<const Grammar>& grammar() const { return grammar_; }
  const std::shared_ptr<const TokenTable>& table() const { return table_; }
  size_t hits() const;
  size_t misses() const;
  size_t entries() const;

 private:
  struct VecHash {
    size_t operator()(const std::vector<uint32_t>& v) const;
  };
  std::shared_ptr<const Grammar> grammar_;
  std::shared_ptr<const TokenTable> table_;
  size_t max_entries_;

  mutable std::mutex mu_;  // guards the map, the eviction order and the counters
  std::unordered_map<std::vector<uint32_t>, Mask, VecHash> masks_;
  std::deque<std::vector<uint32_t>> order_;  // insertion order, for eviction
  size_t hits_ = 0, misses_ = 0;

  // One DFA kept warm across misses. A miss that finds it busy (another thread computing)
  // uses a fresh one rather than wait.
  std::mutex dfa_mu_;
  LazyStateDfa dfa_;
};

}  // namespace dflash
