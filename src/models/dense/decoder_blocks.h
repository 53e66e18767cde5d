#pragma once
// The pieces of a pre-norm decoder layer that target and draft forwards share, as sequences
// of backend ops.
#include "kernels/backend.h"
#include "models/dense/dense_model.h"

namespace dflash {

struct LayerDims {
  int hidden, n_heads, n_kv_heads, head_dim, ffn;
  float eps;
  bool qk_norm, qkv_bias;
};

// q, k, v projections of normed rows h, with biases, per-head q/k norms and RoPE applied
// (cos/sin: [n][head_dim/2]). q may be null (context rows of a draft only need keys and values).
void project_qkv(const Backend& be, const LayerWeights& w, const LayerDims& d, const float* h, int n, const float* cos,
                 const float* sin, float* q, float* k, float* v);

// x += down(silu(gate(h)) * up(h)), h = post_attention_layernorm(x). h: [n][hidden], g and
// u: [n][ffn] scratch.
void mlp_residual(const Backend& be, const LayerWeights& w, const LayerDims& d, float* x, int n, float* h, float* g,
                  float* u);

}  // namespace dflash
