#pragma once
// Keys and values of every layer for positions [0, length), laid out
// [layer][kv_head][capacity][row] so attention reads each head's keys contiguously. A row is
// one position of one kv head: head_dim floats (f32 or f16, llama.cpp's default), or head_dim/32 GGUF Q8_0 / Q4_0 blocks
// (an fp16 scale per 32 values), quantized when stored.
// It is the sequence state of attention layers (models/sequence_state.h). Rolling back after
// a rejected draft is just lowering `length`: rows are independent, and rows past it are
// overwritten by the next forward.
#include <cstddef>
#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "kernels/backend.h"
#include "kernels/kernels.h"
#include "kernels/weight_matrix.h"
#include "models/sequence_state.h"

namespace dflash {

// Cache element formats: f32 (default), f16, q8 (Q8_0) and q4 (Q4_0).
bool kv_type_supported(WType t);
WType parse_kv_type(const std::string& s);  // "f32", "f16", "q8"/"q8_0", "q4"/"q4_0"

// Throws dflash::Error unless a cache of this format can hold rows of head_dim values.
void check_kv_type(WType type, int head_dim);

class KVCache final : public SequenceState {
 public:
  KVCache() = default;
  // Memory from `backend` (null: anonymous pages, for tests). Throws dflash::Error for a
  // quantized type when head_dim is not a multiple of 32.
  KVCache(int n_layers, int n_kv_heads, int head_dim, int capacity, WType type = WType::F32,
          const Backend* backend = nullptr);
  KVCache(KVCache&&) = default;
  KVCache& operator=(KVCache&&) = default;

  int capacity() const override { return capacity_; }
  int length() const override { return length_; }
  int rollback_point(int n) const override { return n < 0 ? 0 : n < length_ ? n : length_; }
  void rollback(int n) override { if (n < length_) length_ = n < 0 ? 0 : n; }
  size_t bytes() const override { return 2 * bytes_; }
  int snapshot_point() const override { return length_; }
  std::unique_ptr<StateSnapshot> snapshot(int n) const override;
  bool restore(const StateSnapshot& s) override;
  // Rows [0, n) of every layer and head into `out` / back from `in` (n * row_bytes per head,
  // k then v): what a snapshot of a hybrid state holds of its attention layers too.
  void copy_rows_out(int n, std::vector<uint8_t>& out) const;
  void copy_rows_in(int n, const uint8_t* in);
  std::string layout() const;
  size_t rows_bytes(int n) const { return 2 * size_t(n_layers_) * size_t(n_kv_heads_) * size_t(n) * row_bytes_; }
  // The model that wrote rows up to n (positions are stored before the length moves).
  void set_length(int n) { length_ = n; }
  WType type() const { return type_; }
  size_t row_bytes() const { return row_bytes_; }

  uint8_t* k(int layer) { return k_.get() + layer_bytes() * size_t(layer); }
  uint8_t* v(int layer) { return v_.get() + layer_bytes() * size_t(layer); }
  const uint8_t* k(int layer) const { return k_.get() + layer_bytes() * size_t(layer); }
  const uint8_t* v(int layer) const { return v_.get() + layer_bytes() * size_t(layer); }

  // Stores n rows of k and v ([n][n_kv_heads * head_dim] fp32) at positions pos0.. of a layer.
  void store(int layer, const float* k, const float* v, int pos0, int n);
  // Fills the attention arguments that describe this layer's cache.
  void bind(int layer, AttentionArgs& a) const;

 private:
  size_t layer_bytes() const { return size_t(n_kv_heads_) * size_t(capacity_) * row_bytes_; }
  int n_layers_ = 0, n_kv_heads_ = 0, head_dim_ = 0, capacity_ = 0;
  int length_ = 0;
  WType type_ = WType::F32;
  size_t row_bytes_ = 0;
  size_t bytes_ = 0;  // of each of k_ and v_
  std::shared_ptr<uint8_t> k_, v_;  // one owner: KVCache moves, it is never copied
};

}  // namespace dflash
