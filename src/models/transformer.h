#pragma once
// A decoder-only target model (Qwen3, Qwen2, Llama): weights plus one forward function that
// the architecture's ArchSpec switches. Single-flight: one forward at a time per instance.
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "kernels/weight_matrix.h"
#include "models/kv_cache.h"
#include "models/model_config.h"
#include "util/thread_pool.h"

namespace dflash {

struct LayerWeights {
  WeightMatrix wq, wk, wv, wo, gate, up, down;
  std::vector<float> attn_norm, ffn_norm, q_norm, k_norm, bq, bk, bv;
};

// Puts Q8_0/Q4_0 matrices into the interleaved layout the int8 kernels stream (lossless;
// kernels/weight_matrix.h). A memory-mapped source's pages are released once copied, so a
// GGUF file is not held in memory twice.
void pack_for_kernels(WeightMatrix& w);
void pack_for_kernels(LayerWeights& w);

// One layer of random weights for speed benchmarks of real shapes (the values do not matter):
// xorshift noise drawn from `state` in the order wq, wk, wv, wo, gate, up, down, norms of
// ones, zero q/k/v biases when `bias`, packed for the kernels.
LayerWeights random_layer_weights(uint64_t& state, int64_t hidden, int n_heads, int n_kv_heads, int head_dim,
                                  int64_t ffn, WType type, bool qk_norm, bool bias);

struct LoadOptions {
  std::optional<WType> weights;  // nullopt: keep the checkpoint's own dtype
  bool populate = false;         // read all pages at load (benchmarks)
};

struct ForwardArgs {
  const int32_t* tokens = nullptr;
  int n = 0;                   // rows in this call, at positions cache.length() ...
  int logits_from = -1;        // compute logits for rows [logits_from, n); -1 = last row only
  float* logits = nullptr;     // [(n - logits_from)][vocab]
  const std::vector<int>* capture_layers = nullptr;  // layer ids whose outputs to keep
  float* capture = nullptr;    // [n][capture_layers->size()][hidden]
};

class Transformer {
 public:
  static std::unique_ptr<Transformer> load(const std::string& dir, const LoadOptions& opt);
  // Random weights of a given shape (benchmarks of real shapes without any file).
  static std::unique_ptr<Transformer> random(const ModelConfig& cfg, WType weights, uint64_t seed);

  const ModelConfig& config() const { return cfg_; }
  // A cache of `capacity` positions in the element format set by set_cache_type (f32 default).
  KVCache make_cache(int capacity) const;
  // f32, q8 (Q8_0) or q4 (Q4_0); throws dflash::Error if the model's head_dim cannot take it.
  void set_cache_type(WType t);
  WType cache_type() const { return cache_type_; }
  // Runs rows through the model, appends their K/V to the cache and advances its length.
  void forward(KVCache& cache, const ForwardArgs& args, ThreadPool* pool) const;

  void embed(int32_t token, float* out) const;
  const WeightMatrix& lm_head() const { return lm_head_; }
  // Final RMSNorm then LM head for `rows` hidden states (used by drafts that share the head).
  void logits_from_hidden(const float* h, int rows, float* logits, ThreadPool* pool) const;
  size_t weight_bytes() const;            // bytes streamed per decode step
  WType weight_type() const { return lm_head_.type; }

 private:
  ModelConfig cfg_;
  WeightMatrix embed_, lm_head_;
  std::vector<LayerWeights> layers_;
  std::vector<float> final_norm_;
  std::vector<double> inv_freq_;
  std::shared_ptr<const void> storage_;  // the mapped files, kept alive
  WType cache_type_ = WType::F32;
  friend struct TransformerLoader;
  friend struct GgufModelLoader;
};

}  // namespace dflash
