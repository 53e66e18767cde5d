#pragma once
// The pieces of a pre-norm decoder layer that target and draft forwards share.
#include <vector>

#include "models/kv_cache.h"
#include "models/transformer.h"

namespace dflash {

struct LayerDims {
  int hidden, n_heads, n_kv_heads, head_dim, ffn;
  float eps;
  bool qk_norm, bias;
};

// cos/sin for positions pos0..pos0+n-1 ([n][head_dim/2]), scaled by `mscale` (YaRN).
void rope_tables(const std::vector<double>& inv_freq, int pos0, int n, float mscale, std::vector<float>& cos,
                 std::vector<float>& sin);

// q, k, v projections of normed rows h, with biases, per-head q/k norms and RoPE applied.
// q may be null (context rows of a draft only need keys and values).
void project_qkv(const LayerWeights& w, const LayerDims& d, const float* h, int n, const float* cos, const float* sin,
                 float* q, float* k, float* v, ThreadPool* pool);

// Stores n rows of k/v ([n][kv_heads*head_dim]) at positions pos0.. of layer `layer`.
void store_kv(KVCache& cache, int layer, const LayerDims& d, const float* k, const float* v, int pos0, int n);

// x += down(silu(gate(h)) * up(h)), h = post_attention_layernorm(x). Scratch is resized.
void mlp_residual(const LayerWeights& w, const LayerDims& d, float* x, int n, std::vector<float>& h,
                  std::vector<float>& g, std::vector<float>& u, ThreadPool* pool);

}  // namespace dflash
