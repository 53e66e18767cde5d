#pragma once
// Keys and values of every layer for positions [0, length), laid out
// [layer][kv_head][capacity][head_dim] so attention reads each head's keys contiguously.
// Rolling back after a rejected draft is just lowering `length`: rows past it are overwritten
// by the next forward.
#include <cstddef>
#include <cstdint>
#include <vector>

namespace dflash {

class KVCache {
 public:
  KVCache() = default;
  KVCache(int n_layers, int n_kv_heads, int head_dim, int capacity)
      : n_layers_(n_layers), n_kv_heads_(n_kv_heads), head_dim_(head_dim), capacity_(capacity),
        k_(size_t(n_layers) * n_kv_heads * capacity * head_dim),
        v_(size_t(n_layers) * n_kv_heads * capacity * head_dim) {}

  int capacity() const { return capacity_; }
  int length() const { return length_; }
  void set_length(int n) { length_ = n; }
  void rollback(int n) { if (n < length_) length_ = n; }

  float* k(int layer) { return k_.data() + size_t(layer) * n_kv_heads_ * capacity_ * head_dim_; }
  float* v(int layer) { return v_.data() + size_t(layer) * n_kv_heads_ * capacity_ * head_dim_; }
  size_t bytes() const { return (k_.size() + v_.size()) * sizeof(float); }

 private:
  int n_layers_ = 0, n_kv_heads_ = 0, head_dim_ = 0, capacity_ = 0;
  int length_ = 0;
  std::vector<float> k_, v_;
};

}  // namespace dflash
