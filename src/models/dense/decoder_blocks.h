#pragma once
// A pre-norm decoder layer (attention then SwiGLU MLP) as the dense targets and the DFlash
// drafts share it: its weights, its sizes, its activations, and its pieces as sequences of
// backend ops.
#include <cstdint>
#include <vector>

#include "kernels/backend.h"
#include "kernels/weight_matrix.h"

namespace dflash {

struct LayerWeights {
  WeightMatrix wq, wk, wv, wo, gate, up, down;
  std::vector<float> attn_norm, ffn_norm, q_norm, k_norm, bq, bk, bv;
};

// Hands a layer's matrices to the backend for its layout (Backend::prepare_weight).
void prepare_layer(const Backend& be, LayerWeights& w);

// One layer of random weights for speed benchmarks of real shapes (the values do not matter):
// xorshift noise drawn from `state` in the order wq, wk, wv, wo, gate, up, down, norms of
// ones, zero q/k/v biases when `bias`, prepared for the backend's kernels.
LayerWeights random_layer_weights(const Backend& be, uint64_t& state, int64_t hidden, int n_heads, int n_kv_heads,
                                  int head_dim, int64_t ffn, WType type, bool qk_norm, bool bias);

struct LayerDims {
  int hidden, n_heads, n_kv_heads, head_dim, ffn;
  float eps;
  bool qk_norm, qkv_bias;
};

// The activations of decoder layers over a call's rows, in grow-once buffers (a model and a
// draft each keep one set; single-flight).
struct DecoderRows {
  float *x, *h, *q, *k, *v, *att, *gate, *up, *cos, *sin;
  int *pos, *kbeg, *kend;
};
struct DecoderActivations {
  ActivationBuffer x, h, q, k, v, att, gate, up, cos, sin, pos, kbeg, kend;
  // Pointers for `rows` rows of layers shaped `d`, growing the buffers when needed.
  DecoderRows take(const Backend& be, size_t rows, const LayerDims& d);
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
