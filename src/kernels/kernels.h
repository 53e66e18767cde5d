#pragma once
// The tensor kernels the models call. Each hot kernel has a fast version (kernels/cpu, SIMD
// with run-time dispatch through Highway) and a plain reference twin (kernels/ref) that tests
// compare it with.
//
// Batch invariance: every output element is reduced in an order that depends only on its own
// inputs, never on how many rows are in the batch or how work is split across threads. So a
// position's logits are bitwise identical in decode, in a 5-token verify and in a 512-token
// prefill chunk.
#include <cstdint>
#include <initializer_list>

#include "kernels/weight_matrix.h"
#include "util/thread_pool.h"

namespace dflash {

// y[m][n] = sum_k x[m][k] * W[n][k], for m < M. x is fp32 [M][K], y is fp32 [M][N].
void matmul(const float* x, int M, const WeightMatrix& w, float* y, ThreadPool* pool);

// Several products of the same x (q/k/v, gate/up): x is quantized once and all the pieces go
// to the pool in one job, so the small ones run in parallel too and there is one wait, not
// one per matrix. Each y is exactly what matmul() gives.
struct MatmulOut {
  const WeightMatrix* w;
  float* y;
};
void matmul_multi(const float* x, int M, std::initializer_list<MatmulOut> outs, ThreadPool* pool);

// Attention over a KV cache laid out [kv_head][capacity][row], a row being head_dim values
// in `kv_type` (F32, or Q8_0 / Q4_0 blocks of 32 along head_dim). Query row i (head h)
// attends to keys [kbeg[i], kend[i]) of kv head h / (n_heads / n_kv_heads). q and out are
// [n_q][n_heads * head_dim].
//
// Scores against Q8_0 / Q4_0 keys are defined in integers, as for the int8 weight formats
// (quant_act.h): the query row is quantized to int8 blocks of 32 with an fp32 scale dq, each
// key block's dot product with it is an exact integer isum, and
// s = fma(float(isum), dk * dq, s) over the blocks in order from +0, times scale. Values are
// decoded to fp32 (scale times code).
//
// Batch invariance: keys are visited in fixed tiles of absolute positions, grouped into fixed
// chunks whose partial softmax states are merged in position order, so a row's result depends
// only on its own query and key range, never on n_q, the other rows or the thread count.
struct AttentionArgs {
  const float* q;
  int n_q, n_heads, n_kv_heads, head_dim;
  const void* k_cache;
  const void* v_cache;
  int64_t capacity;  // rows per kv head in the cache
  const int* kbeg;
  const int* kend;
  float scale;
  float* out;
  WType kv_type = WType::F32;
};
void attention(const AttentionArgs& a, ThreadPool* pool);

// Row-wise RMSNorm: out = x / sqrt(mean(x^2) + eps) * w. out may alias x.
void rmsnorm(const float* x, int rows, int dim, const float* w, float eps, float* out);

// NeoX-style rotate-half RoPE on [rows][n_heads][head_dim], cos/sin tables [rows][head_dim/2].
void rope_neox(float* x, int rows, int n_heads, int head_dim, const float* cos, const float* sin);

// out[i] = silu(gate[i]) * up[i].
void silu_mul(const float* gate, const float* up, int64_t n, float* out);

// out[i] = f32_to_f16(x[i]) (numeric.h), bit for bit.
void f32_to_f16_row(const float* x, int64_t n, uint16_t* out);

namespace ref {
void matmul(const float* x, int M, const WeightMatrix& w, float* y);
void attention(const AttentionArgs& a);
void silu_mul(const float* gate, const float* up, int64_t n, float* out);
void f32_to_f16_row(const float* x, int64_t n, uint16_t* out);
}  // namespace ref

// Which SIMD target the fast kernels dispatched to on this machine (for bench output).
const char* simd_target_name();

// The block-quantized formats whose matmul quantizes the activations to int8 and multiplies
// in integers (kernels/cpu/quant_act.h defines the arithmetic): callers such as the bench
// measure that path's rate separately, since its compute roof is not the float kernel's.
inline bool uses_int8_path(WType t) {
  return t == WType::Q8_0 || t == WType::Q4_0 || t == WType::Q4_K || t == WType::Q6_K;
}
// Which SIMD target the int8 kernel dispatched to (it may include targets the float kernel's
// translation unit does not, e.g. AVX3_DL for VNNI; on ARM, SDOT for the packed formats).
const char* qmatmul_target_name();

}  // namespace dflash
