#include "decoding/grammar/token_mask.h"

#include <algorithm>
#include <numeric>

#include "decoding/grammar/grammar_matcher.h"
#include "tokenizer/tokenizer.h"
#include "util/error.h"

namespace dflash {

TokenTable::TokenTable(const std::vector<std::string>& token_bytes) {
  if (token_bytes.size() >= size_t(INT32_MAX)) throw Error("token table: vocabulary too large");
  offsets_.reserve(token_bytes.size() + 1);
  offsets_.push_back(0);
  for (const std::string& t : token_bytes) {
    data_ += t;
    offsets_.push_back(uint32_t(data_.size()));
  }

  // Sorted by bytes, tokens that share a prefix are neighbours: each one adds the nodes past
  // its longest common prefix with the one before, which yields the trie in preorder.
  std::vector<int32_t> order;
  for (int32_t id = 0; id < int32_t(token_bytes.size()); ++id) {
    if (!token_bytes[id].empty()) order.push_back(id);
  }
  std::sort(order.begin(), order.end(), [&](int32_t a, int32_t b) {
    return token_bytes[a] != token_bytes[b] ? token_bytes[a] < token_bytes[b] : a < b;
  });
  std::vector<uint32_t> path;  // path[d] = the node at depth d + 1 on the current prefix
  std::string_view prev;
  for (int32_t id : order) {
    const std::string_view s = bytes(id);
    size_t common = 0;
    while (common < s.size() && common < prev.size() && s[common] == prev[common]) ++common;
    while (path.size() > common) {  // these subtrees are complete
      node_skip_[path.back()] = uint32_t(node_byte_.size());
      path.pop_back();
    }
    for (size_t d = common; d < s.size(); ++d) {
      path.push_back(uint32_t(node_byte_.size()));
      node_byte_.push_back(uint8_t(s[d]));
      node_depth_.push_back(uint32_t(d + 1));
      node_skip_.push_back(0);
      node_tok_begin_.push_back(uint32_t(node_tokens_.size()));
    }
    // Tokens end at the deepest node of their path; duplicates of the same bytes, and the
    // token of a node before any longer one, come in sorted order, so each node's tokens are
    // contiguous.
    node_tokens_.push_back(id);
    max_depth_ = std::max<uint32_t>(max_depth_, uint32_t(s.size()));
    prev = s;
  }
  for (uint32_t n : path) node_skip_[n] = uint32_t(node_byte_.size());
  node_tok_begin_.push_back(uint32_t(node_tokens_.size()));
  // node_tok_begin_[i] was set when node i was made, before its own token was appended, so
  // [begin[i], begin[i + 1]) holds exactly the tokens that end at node i.
}

std::shared_ptr<const TokenTable> TokenTable::from_tokenizer(const Tokenizer& tok, int32_t vocab) {
  if (vocab < tok.vocab_size()) {
    throw Error("token table: the model's vocabulary (" + std::to_string(vocab) + ") is smaller than the tokenizer's (" +
                std::to_string(tok.vocab_size()) + ")");
  }
  std::vector<std::string> bytes(static_cast<size_t>(vocab));
  for (int32_t id = 0; id < tok.vocab_size(); ++id) {
    if (!tok.is_special(id)) bytes[size_t(id)] = tok.token_bytes(id);
  }
  return std::make_shared<const TokenTable>(bytes);
}

size_t LazyStateDfa::VecHash::operator()(const std::vector<uint32_t>& v) const {
  return GrammarMatcher::hash_state(v.data(), v.size());
}

LazyStateDfa::LazyStateDfa(const Grammar& g) : g_(g) { clear(); }

void LazyStateDfa::clear() {
  states_.clear();
  ids_.clear();
  trans_.clear();
  intern({});  // kDead
}

int32_t LazyStateDfa::intern(const std::vector<uint32_t>& state) {
  auto it = ids_.find(state);
  if (it != ids_.end()) return it->second;
  const int32_t id = int32_t(states_.size());
  states_.push_back(state);
  ids_.emplace(state, id);
  // Bytes no stack can take are dead without stepping anything.
  const ByteSet next = GrammarMatcher::next_bytes(g_, state.data(), state.size());
  trans_.resize(trans_.size() + 256);
  for (int b = 0; b < 256; ++b) trans_[size_t(id) * 256 + b] = next.has(uint8_t(b)) ? kUnknown : kDead;
  return id;
}

int32_t LazyStateDfa::compute(int32_t s, uint8_t b) {
  const std::vector<uint32_t>& from = states_[s];
  GrammarMatcher::step(g_, from.data(), from.size(), b, scratch_);
  const int32_t t = intern(scratch_);  // may grow trans_: index it afterwards
  trans_[size_t(s) * 256 + b] = t;
  return t;
}

void compute_token_mask(const TokenTable& table, LazyStateDfa& dfa, const std::vector<uint32_t>& state,
                        std::vector<uint64_t>& mask) {
  mask.assign(table.mask_words(), 0);
  const uint8_t* byte = table.node_byte().data();
  const uint32_t* depth = table.node_depth().data();
  const uint32_t* skip = table.node_skip().data();
  const uint32_t* tok_begin = table.node_tok_begin().data();
  const int32_t* tokens = table.node_tokens().data();
  // at_depth[d] = the DFA state after the first d bytes of the current trie path.
  std::vector<int32_t> at_depth(table.max_depth() + 1);
  at_depth[0] = dfa.intern(state);
  if (at_depth[0] == LazyStateDfa::kDead) return;
  const size_t n = table.node_count();
  for (size_t i = 0; i < n;) {
    const uint32_t d = depth[i];
    const int32_t s = dfa.next(at_depth[d - 1], byte[i]);
    if (s == LazyStateDfa::kDead) {
      i = skip[i];
      continue;
    }
    at_depth[d] = s;
    for (uint32_t k = tok_begin[i]; k < tok_begin[i + 1]; ++k) {
      const int32_t t = tokens[k];
      mask[size_t(t) >> 6] |= uint64_t(1) << (t & 63);
    }
    ++i;
  }
}

size_t MaskCache::VecHash::operator()(const std::vector<uint32_t>& v) const {
  return GrammarMatcher::hash_state(v.data(), v.size());
}

MaskCache::MaskCache(std::shared_ptr<const Grammar> grammar, std::shared_ptr<const TokenTable> table,
                     size_t max_bytes)
    : grammar_(std::move(grammar)), table_(std::move(table)), dfa_(*grammar_) {
  if (!grammar_ || !table_) throw Error("mask cache: needs a grammar and a token table");
  max_entries_ = std::max<size_t>(16, max_bytes / std::max<size_t>(1, table_->mask_words() * 8));
}

MaskCache::Mask MaskCache::get(const std::vector<uint32_t>& state, bool* hit) {
  {
    std::lock_guard<std::mutex> lock(mu_);
    auto it = masks_.find(state);
    if (it != masks_.end()) {
      ++hits_;
      if (hit) *hit = true;
      return it->second;
    }
    ++misses_;
  }
  if (hit) *hit = false;
  auto mask = std::make_shared<std::vector<uint64_t>>();
  std::unique_lock<std::mutex> dfa_lock(dfa_mu_, std::try_to_lock);
  if (dfa_lock.owns_lock()) {
    // A DFA that grew past this many states (deep recursion, long counted repetitions) is
    // started over, so its memory stays bounded (each state holds a 1 KiB row).
    if (dfa_.state_count() > 8192) dfa_.clear();
    compute_token_mask(*table_, dfa_, state, *mask);
  } else {
    LazyStateDfa local(*grammar_);
    compute_token_mask(*table_, local, state, *mask);
  }
  Mask out = std::move(mask);
  std::lock_guard<std::mutex> lock(mu_);
  auto [it, fresh] = masks_.emplace(state, out);
  if (!fresh) return it->second;  // another thread computed it meanwhile
  order_.push_back(state);
  while (masks_.size() > max_entries_) {
    masks_.erase(order_.front());
    order_.pop_front();
  }
  return out;
}

size_t MaskCache::hits() const {
  std::lock_guard<std::mutex> lock(mu_);
  return hits_;
}
size_t MaskCache::misses() const {
  std::lock_guard<std::mutex> lock(mu_);
  return misses_;
}
size_t MaskCache::entries() const {
  std::lock_guard<std::mutex> lock(mu_);
  return masks_.size();
}

}  // namespace dflash
