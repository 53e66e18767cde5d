#pragma once
// tokenizer.json "model" of type BPE over the ByteLevel alphabet. Words arrive as raw bytes;
// vocab and merges are translated from their ByteLevel text once, at load.
#include <algorithm>
#include <cstdint>
#include <iterator>
#include <optional>
#include <shared_mutex>
#include <string>
#include <string_view>
#include <unordered_map>
#include <vector>

#include "tokenizer/flat_map.h"
#include "tokenizer/json_reader.h"

namespace dflash::tok {

struct StringHash {
  using is_transparent = void;
  size_t operator()(std::string_view s) const { return std::hash<std::string_view>{}(s); }
};
template <class V>
using StringMap = std::unordered_map<std::string, V, StringHash, std::equal_to<>>;

// (left id, right id) -> (rank, merged id), open addressing: the merge loop does one lookup per
// candidate pair, so this is the hottest table of the tokenizer.
class MergeTable {
 public:
  struct Entry {
    uint64_t key;
    uint32_t rank;
    int32_t merged;
  };
  void reserve(size_t n);
  void insert(int32_t left, int32_t right, uint32_t rank, int32_t merged);  // later wins
  const Entry* find(int32_t left, int32_t right) const {
    const uint64_t key = pack(left, right);
    for (uint64_t h = hash(key);; h = (h + 1) & mask_) {
      const Entry& e = slots_[h];
      if (e.key == key) return &e;
      if (e.key == kEmpty) return nullptr;
    }
  }
  size_t size() const { return size_; }

 private:
  static constexpr uint64_t kEmpty = ~0ull;
  static uint64_t pack(int32_t a, int32_t b) {
    return (static_cast<uint64_t>(static_cast<uint32_t>(a)) << 32) | static_cast<uint32_t>(b);
  }
  uint64_t hash(uint64_t key) const { return (key * 0x9E3779B97F4A7C15ull) >> shift_; }
  std::vector<Entry> slots_{Entry{kEmpty, 0, 0}};
  uint64_t mask_ = 0;
  int shift_ = 63;
  size_t size_ = 0;
};

class BpeModel {
 public:
  BpeModel() { std::fill(std::begin(byte_id_), std::end(byte_id_), -1); }
  BpeModel(const BpeModel&) = delete;
  BpeModel& operator=(const BpeModel&) = delete;

  // Reads tokenizer.json's "model" (doc.tree["model"] plus doc's vocab and merges); throws
  // file_error(origin, ...) on anything unsupported.
  void load(const TokenizerJsonDoc& doc, const std::string& origin);

  // Appends the ids of one pre-tokenized word (raw bytes). Thread-safe.
  void encode_word(std::string_view word, std::vector<int32_t>& out) const;

  // Raw bytes of a vocab token (its text when that is not ByteLevel), empty if unknown.
  std::string_view token_bytes(int32_t id) const {
    return id >= 0 && static_cast<size_t>(id) < id_bytes_.size() ? std::string_view(id_bytes_[id])
                                                                  : std::string_view();
  }
  // id of a token given in vocab (ByteLevel) text, like Hugging Face's token_to_id.
  std::optional<int32_t> id_of_text(std::string_view text) const;
  int32_t max_id() const { return static_cast<int32_t>(id_bytes_.size()) - 1; }

 private:
  void merge(std::string_view word, std::vector<int32_t>& out) const;

  std::vector<std::string> id_bytes_;
  FlatStringMap by_bytes_;       // vocab tokens of the ByteLevel alphabet, keyed by raw bytes
  StringMap<int32_t> odd_text_;  // the few that are not, keyed by their text
  int32_t byte_id_[256];
  MergeTable merges_;
  std::optional<int32_t> unk_;
  bool fuse_unk_ = false;
  bool ignore_merges_ = false;

  // Word -> ids. Prompts repeat words a lot; the cache makes repeats a hash lookup.
  mutable std::shared_mutex cache_mutex_;
  mutable FlatStringMap cache_;
};

}  // namespace dflash::tok
