#pragma once
// The small row-wise ops around the matmuls and attention: residual adds, biases, scales,
// RoPE tables, fp16 rounding, softcapping, DFlash2's block convolution and its candidate
// selector's edge scores. Each is one plain loop whose summation order is fixed by its
// definition below, so it is its own reference and batch invariant by construction: row t's
// result reads row t's inputs (and, for the convolution, the rows before it in its block)
// only. Their cost is negligible next to the matmuls; a backend other than the CPU's
// implements the same definitions.
#include <cstddef>
#include <cstdint>

#include "kernels/weight_matrix.h"

namespace dflash {

// x[i] += y[i]
void add_rows(float* x, const float* y, size_t n);
// x[r][i] += b[i] for r < rows, i < n
void add_bias_rows(float* x, int rows, const float* b, int n);
// x[i] *= s
void scale_rows(float* x, size_t n, float s);
// x[i] = f16_to_f32(f32_to_f16(x[i])): what an engine storing fp16 activations sees (values
// past 65504 become inf).
void round_rows_to_f16(float* x, size_t n);
// x[i] = cap * tanh(x[i] / cap)
void softcap_rows(float* x, size_t n, float cap);
bool all_finite_rows(const float* x, size_t n);
// cos[i][j] = cos(float(pos[i]) * float(inv_freq[j])) * mscale, sin likewise; [n][half].
void rope_table_rows(const double* inv_freq, int half, const int* pos, int n, float mscale, float* cos, float* sin);

// x[i] = x[i] * (1 / (1 + exp(-gate[i]))): the sigmoid output gate of gated attention.
void sigmoid_gate_rows(float* x, const float* gate, size_t n);
// NeoX rotate-half RoPE on the first `rot` dims of each head (pairs i, i + rot/2), the rest
// unchanged: x[rows][n_heads][head_dim], cos/sin [rows][rot/2]. For each pair:
//   a' = a*cos - b*sin, b' = b*cos + a*sin (products rounded, then the sum).
void rope_neox_partial_rows(float* x, int rows, int n_heads, int head_dim, int rot, const float* cos,
                            const float* sin);

// DFlash2's short causal convolution over a block of `rows` rows (shared/dflash-format.md):
// out[t][c] = sum over tap = 0, 1, ... < taps with tap <= t, in that order, from +0, of
//   (base[tap * dim + c] + dyn[t * dyn_stride + tap * (dim / group) + c / group]) * in[t - tap][c].
// The first row of a block sees only itself. `in` and `out` must not overlap.
struct BlockConvArgs {
  const float* in;
  float* out;
  int rows, dim, taps, group;
  const float* base;   // [taps][dim]
  const float* dyn;    // per row: [taps][dim / group] at dyn + t * dyn_stride
  size_t dyn_stride;
};
void causal_block_conv(const BlockConvArgs& a);

// The candidate selector's edge scores (DFlash2): for each predecessor i < n_pred and
// candidate j < n_cand,
//   out[i * n_cand + j] = sum over r < rank, in order, from +0, of float(pred[i][r] * h[r]) * succ[j][r].
struct EdgeScoreArgs {
  const float* pred;  // [n_pred][rank]
  int n_pred;
  const float* h;     // [rank]
  const float* succ;  // [n_cand][rank]
  int n_cand, rank;
  float* out;         // [n_pred][n_cand]
};
void edge_scores(const EdgeScoreArgs& a);

// For each of `rows` rows of n values, the k ids of its largest values, by descending value,
// ascending id on equal values: out[r * k + j].
void top_k_ids(const float* x, int rows, int n, int k, int32_t* out);

}  // namespace dflash
