#pragma once
// Byte string -> short list of ids, open addressing over one key arena and one value arena.
// Used for the vocab (one id per key) and the per-word BPE cache, the two lookups every
// pre-tokenized word does; std::unordered_map spent most of the encode time in bucket chasing.
#include <cstdint>
#include <cstring>
#include <span>
#include <string>
#include <string_view>
#include <vector>

namespace dflash::tok {

inline uint64_t hash_bytes(std::string_view s) {
  uint64_t h = 0x243F6A8885A308D3ull ^ (s.size() * 0x9E3779B97F4A7C15ull);
  size_t i = 0;
  for (; i + 8 <= s.size(); i += 8) {
    uint64_t w;
    std::memcpy(&w, s.data() + i, 8);
    h = (h ^ w) * 0xFF51AFD7ED558CCDull;
    h ^= h >> 32;
  }
  uint64_t tail = 0;
  if (i < s.size()) std::memcpy(&tail, s.data() + i, s.size() - i);
  h = (h ^ tail) * 0xC4CEB9FE1A85EC53ull;
  return h ^ (h >> 29);
}

class FlatStringMap {
 public:
  FlatStringMap() { rebuild(16); }

  std::span<const int32_t> find(std::string_view key, uint64_t hash) const {
    for (size_t i = hash & mask_;; i = (i + 1) & mask_) {
      const Slot& s = slots_[i];
      if (s.key_len == kEmpty) return {};
      if (s.hash == hash && s.key_len == key.size() &&
          std::memcmp(keys_.data() + s.key_off, key.data(), key.size()) == 0) {
        return {values_.data() + s.val_off, s.val_len};
      }
    }
  }
  std::span<const int32_t> find(std::string_view key) const { return find(key, hash_bytes(key)); }

  // A key inserted twice keeps its first values.
  void insert(std::string_view key, uint64_t hash, std::span<const int32_t> values) {
    if (2 * (size_ + 1) > slots_.size()) rebuild(2 * slots_.size());
    for (size_t i = hash & mask_;; i = (i + 1) & mask_) {
      Slot& s = slots_[i];
      if (s.key_len == kEmpty) {
        s = {hash, static_cast<uint32_t>(keys_.size()), static_cast<uint32_t>(key.size()),
             static_cast<uint32_t>(values_.size()), static_cast<uint32_t>(values.size())};
        keys_.append(key);
        values_.insert(values_.end(), values.begin(), values.end());
        ++size_;
        return;
      }
      if (s.hash == hash && s.key_len == key.size() &&
          std::memcmp(keys_.data() + s.key_off, key.data(), key.size()) == 0) {
        return;
      }
    }
  }
  void insert(std::string_view key, std::span<const int32_t> values) {
    insert(key, hash_bytes(key), values);
  }

  size_t size() const { return size_; }
  size_t arena_bytes() const { return keys_.size() + values_.size() * sizeof(int32_t); }
  void clear() {
    keys_.clear();
    values_.clear();
    rebuild(16);
  }

 private:
  static constexpr uint32_t kEmpty = ~0u;
  struct Slot {
    uint64_t hash;
    uint32_t key_off, key_len, val_off, val_len;
  };
  void rebuild(size_t capacity) {
    std::vector<Slot> old = std::move(slots_);
    slots_.assign(capacity, Slot{0, 0, kEmpty, 0, 0});
    mask_ = capacity - 1;
    size_ = 0;
    for (const Slot& s : old) {
      if (s.key_len == kEmpty) continue;
      size_t i = s.hash & mask_;
      while (slots_[i].key_len != kEmpty) i = (i + 1) & mask_;
      slots_[i] = s;
      ++size_;
    }
  }

  std::vector<Slot> slots_;
  size_t mask_ = 0, size_ = 0;
  std::string keys_;
  std::vector<int32_t> values_;
};

}  // namespace dflash::tok
