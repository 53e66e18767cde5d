#include "tokenizer/bpe_model.h"

#include <mutex>
#include <queue>

#include "tokenizer/byte_level.h"
#include "util/error.h"

namespace dflash::tok {
namespace {

constexpr int64_t kMaxTokenId = 1 << 24;      // far above any real vocab; stops absurd allocations
constexpr size_t kMaxCachedWordBytes = 256;   // longer words are rare and would bloat the cache
constexpr size_t kMaxCacheEntries = 1 << 18;
constexpr size_t kMaxCacheBytes = 64 << 20;

}  // namespace

void MergeTable::reserve(size_t n) {
  size_t cap = 16;
  int bits = 4;
  while (cap < 2 * n) cap <<= 1, ++bits;
  slots_.assign(cap, Entry{kEmpty, 0, 0});
  mask_ = cap - 1;
  shift_ = 64 - bits;
  size_ = 0;
}

void MergeTable::insert(int32_t left, int32_t right, uint32_t rank, int32_t merged) {
  if (2 * (size_ + 1) > slots_.size()) {
    std::vector<Entry> old = std::move(slots_);
    reserve(size_ + 1);
    for (const Entry& e : old) {
      if (e.key != kEmpty) insert(static_cast<int32_t>(e.key >> 32), static_cast<int32_t>(e.key),
                                  e.rank, e.merged);
    }
  }
  const uint64_t key = pack(left, right);
  for (uint64_t h = hash(key);; h = (h + 1) & mask_) {
    Entry& e = slots_[h];
    if (e.key == key) {
      e.rank = rank;
      e.merged = merged;
      return;
    }
    if (e.key == kEmpty) {
      e = {key, rank, merged};
      ++size_;
      return;
    }
  }
}

void BpeModel::load(const TokenizerJsonDoc& doc, const std::string& origin) {
  const nlohmann::json& m = doc.tree["model"];
  if (!m.is_object()) throw file_error(origin, "\"model\" must be an object");
  const std::string type = m.value("type", doc.has_merges ? "BPE" : "");
  if (type != "BPE") {
    throw file_error(origin, "model type '" + type + "' is not supported (only BPE)");
  }
  if (m.value("byte_fallback", false)) {
    throw file_error(origin, "BPE byte_fallback is not supported");
  }
  if (m.contains("dropout") && !m["dropout"].is_null() && m["dropout"].get<double>() != 0.0) {
    throw file_error(origin, "BPE dropout is not supported");
  }
  for (const char* key : {"continuing_subword_prefix", "end_of_word_suffix"}) {
    if (m.contains(key) && !m[key].is_null() && !m[key].get<std::string>().empty()) {
      throw file_error(origin, std::string("BPE ") + key + " is not supported");
    }
  }
  ignore_merges_ = m.value("ignore_merges", false);
  fuse_unk_ = m.value("fuse_unk", false);

  if (!doc.has_vocab) throw file_error(origin, "BPE model has no \"vocab\" object");
  // Text -> id, for resolving merges. Walked backwards so that, as in a JSON object read by
  // Hugging Face, a repeated key keeps its last id.
  FlatStringMap by_text;
  int64_t max_id = -1;
  for (auto it = doc.vocab.rbegin(); it != doc.vocab.rend(); ++it) {
    const auto& [text, id] = *it;
    if (id < 0 || id >= kMaxTokenId) {
      throw file_error(origin, "vocab entry '" + text + "' has a bad id");
    }
    const auto id32 = static_cast<int32_t>(id);
    by_text.insert(text, std::span(&id32, 1));
    max_id = std::max(max_id, id);
  }
  id_bytes_.assign(static_cast<size_t>(max_id + 1), std::string());
  std::string bytes;
  for (const auto& [text, id64] : doc.vocab) {
    const int32_t id = by_text.find(text)[0];
    if (id != id64) continue;  // shadowed by a later duplicate key
    if (byte_level_decode(text, bytes)) {
      id_bytes_[id] = bytes;
      by_bytes_.insert(bytes, std::span(&id, 1));
    } else {
      id_bytes_[id] = text;
      odd_text_[text] = id;
    }
  }
  for (int b = 0; b < 256; ++b) {
    const char c = static_cast<char>(b);
    const auto ids = by_bytes_.find(std::string_view(&c, 1));
    byte_id_[b] = ids.empty() ? -1 : ids[0];
  }

  if (!doc.has_merges) throw file_error(origin, "BPE model has no \"merges\" list");
  merges_.reserve(doc.merges.size());
  std::string joined;
  uint32_t rank = 0;
  auto id_of = [&](std::string_view t) {
    const auto ids = by_text.find(t);
    if (ids.empty()) {
      throw file_error(origin, "merge " + std::to_string(rank) + ": token '" + std::string(t) +
                                   "' is not in the vocab");
    }
    return ids[0];
  };
  for (const auto& [a, b] : doc.merges) {
    joined.assign(a);
    joined.append(b);
    const int32_t ia = id_of(a), ib = id_of(b), ij = id_of(joined);
    merges_.insert(ia, ib, rank, ij);
    ++rank;
  }

  if (m.contains("unk_token") && m["unk_token"].is_string()) {
    unk_ = id_of_text(m["unk_token"].get<std::string>());
    if (!unk_) throw file_error(origin, "unk_token is not in the vocab");
  }
}

std::optional<int32_t> BpeModel::id_of_text(std::string_view text) const {
  std::string bytes;
  if (byte_level_decode(text, bytes)) {
    const auto ids = by_bytes_.find(bytes);
    if (ids.empty()) return std::nullopt;
    return ids[0];
  }
  if (auto it = odd_text_.find(text); it != odd_text_.end()) return it->second;
  return std::nullopt;
}

void BpeModel::encode_word(std::string_view word, std::vector<int32_t>& out) const {
  if (word.empty()) return;
  if (word.size() == 1 && byte_id_[static_cast<uint8_t>(word[0])] >= 0) {
    out.push_back(byte_id_[static_cast<uint8_t>(word[0])]);
    return;
  }
  const bool cacheable = word.size() <= kMaxCachedWordBytes;
  const uint64_t hash = hash_bytes(word);
  if (cacheable) {
    std::shared_lock lock(cache_mutex_);
    const auto ids = cache_.find(word, hash);
    if (!ids.empty()) {
      out.insert(out.end(), ids.begin(), ids.end());
      return;
    }
  }
  const size_t before = out.size();
  const auto whole = ignore_merges_ ? by_bytes_.find(word, hash) : std::span<const int32_t>();
  if (!whole.empty()) {
    // Llama 3: a word that is itself a token is emitted whole, whatever the merges would do.
    out.push_back(whole[0]);
  } else {
    merge(word, out);
  }
  if (cacheable && out.size() > before) {
    std::unique_lock lock(cache_mutex_);
    if (cache_.size() >= kMaxCacheEntries || cache_.arena_bytes() >= kMaxCacheBytes) cache_.clear();
    cache_.insert(word, hash, std::span(out).subspan(before));
  }
}

// Hugging Face's Word::merge_all: repeatedly apply the lowest-ranked merge present, the leftmost
// one first. A heap of candidate pairs with lazy invalidation keeps it O(n log n) for long words.
void BpeModel::merge(std::string_view word, std::vector<int32_t>& out) const {
  struct Symbol {
    int32_t id, prev, next;
  };
  std::vector<Symbol> sym;
  sym.reserve(word.size());
  for (char ch : word) {
    int32_t id = byte_id_[static_cast<uint8_t>(ch)];
    if (id < 0) {
      if (!unk_) continue;  // no unk token: Hugging Face drops the character
      if (fuse_unk_ && !sym.empty() && sym.back().id == *unk_) continue;
      id = *unk_;
    }
    const auto n = static_cast<int32_t>(sym.size());
    sym.push_back({id, n - 1, -1});
    if (n > 0) sym[n - 1].next = n;
  }
  if (sym.empty()) return;

  using Candidate = uint64_t;  // rank << 32 | position: the heap orders by rank, then position
  std::priority_queue<Candidate, std::vector<Candidate>, std::greater<>> heap;
  auto consider = [&](int32_t pos) {
    const int32_t nx = sym[pos].next;
    if (nx < 0) return;
    if (const MergeTable::Entry* e = merges_.find(sym[pos].id, sym[nx].id)) {
      heap.push((static_cast<uint64_t>(e->rank) << 32) | static_cast<uint32_t>(pos));
    }
  };
  for (int32_t i = 0; i + 1 < static_cast<int32_t>(sym.size()); ++i) consider(i);

  while (!heap.empty()) {
    const Candidate c = heap.top();
    heap.pop();
    const auto rank = static_cast<uint32_t>(c >> 32);
    const auto pos = static_cast<int32_t>(c & 0xFFFFFFFFu);
    Symbol& s = sym[pos];
    if (s.id < 0 || s.next < 0) continue;  // merged away, or now last
    Symbol& right = sym[s.next];
    const MergeTable::Entry* e = merges_.find(s.id, right.id);
    if (!e || e->rank != rank) continue;  // this pair changed since it was queued
    s.id = e->merged;
    const int32_t after = right.next;
    right.id = -1;
    s.next = after;
    if (after >= 0) sym[after].prev = pos;
    if (s.prev >= 0) consider(s.prev);
    consider(pos);
  }
  for (int32_t i = 0; i >= 0; i = sym[i].next) out.push_back(sym[i].id);
}

}  // namespace dflash::tok
