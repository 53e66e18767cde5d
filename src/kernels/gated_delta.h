#pragma once
// The Gated DeltaNet kernels of the Qwen3.5 / Qwen3-Next linear-attention layers
// (../shared/qwen35-format.md §3.4): the causal depthwise convolution with its state, and the
// delta-rule recurrence with its gated RMSNorm readout. The fast recurrence is
// kernels/cpu/gated_delta_hwy.cpp, its plain twin kernels/ref/gated_delta_ref.cpp; both run
// the per-row preparation below (gated_delta_rows.h) and differ only in how the state loops
// are vectorised, which does not change any element's order of operations.
//
// Definitions (every product and sum rounded separately: no fused multiply-add, so a target
// without FMA gives the same bits):
//   conv:  out[t][c] = silu(s), s = sum over j = 0 .. K-1, in order, from +0, of
//          w[c][j] * x[t-(K-1)+j][c], where x[u] is in[u] for u >= 0 and state[K-1+u] (the
//          previous call's last K-1 inputs, oldest first) for u < 0; silu(s) = s / (1 + exp(-s)) with
//          exp the fixed sequence of operations in kernels/fixed_exp.h (the same bits in SIMD).
//   recurrence, per row t (in order) and value head h (key head h / (nv / nk)):
//     q^ = q * (1 / sqrt(sum_i q_i*q_i + 1e-6)) * (1 / sqrt(dk)), k^ = k * (1 / sqrt(sum_i k_i*k_i + 1e-6)),
//     sums over i in order from +0; beta = 1 / (1 + exp(-b)); alpha = exp(neg_a * softplus(a + dt_bias)),
//     softplus(x) = x for x > 20 else log1p(exp(x));
//     S[i][c] = alpha * S[i][c] for i in order, and m[c] = sum_i S[i][c] * k^[i] (new S, from +0);
//     d[c] = beta * (v[c] - m[c]);
//     S[i][c] = S[i][c] + k^[i] * d[c] for i in order, and o[c] = sum_i S[i][c] * q^[i] (from +0);
//     gated norm: y[c] = (norm[c] * (o[c] * r)) * silu(z[c]), r = 1 / sqrt(sum_c o[c]*o[c] / dv + eps).
// Batch invariance: a row's outputs and the state after it depend only on the state before it
// and its own inputs, and rows are always taken one at a time in order, so decode, a verify
// block and any prefill chunk give the same bits (no chunked reformulation). Heads are
// independent, so splitting them over threads changes nothing. Quiet rows (GatedDeltaArgs::
// quiet) are ordinary rows without a readout: one call with quiet rows gives the bits of two
// calls, the quiet rows and then the rest.
#include <cstdint>

namespace dflash {

class ThreadPool;

struct ShortConvArgs {
  const float* in;      // [rows][channels], this call's pre-conv inputs
  int rows, channels, kernel;
  const float* weight;  // [channels][kernel]
  const float* state;   // [kernel - 1][channels]: the inputs before row 0, oldest first
  float* out;           // [rows][channels]; must not overlap in
};
// SIMD over channels (kernels/cpu/gated_delta_conv_hwy.cpp); ref::causal_conv_silu is its twin.
void causal_conv_silu(const ShortConvArgs& a);
// y[i] = fixed_exp::exp(x[i]) (kernels/fixed_exp.h) in SIMD: for the test that holds the SIMD
// form of the definition to the scalar one.
void fixed_exp_row(const float* x, int n, float* y);

// state_next = the last K-1 rows of [state ; in] (rows >= 0), oldest first: the conv state
// after this call. `state_next` may equal `state`.
void roll_conv_state(const float* state, const float* in, int rows, int channels, int kernel, float* state_next);

struct GatedDeltaArgs {
  const float* qkv;      // [rows][2*nk*dk + nv*dv]: q | k | v after the convolution and SiLU
  const float* b;        // [rows][nv] (beta before its sigmoid)
  const float* a;        // [rows][nv] (decay input)
  const float* z;        // [rows - quiet][nv*dv] output gate; unused when out is null
  int rows, nk, nv, dk, dv;
  const float* neg_a;    // [nv]: -exp(A_log) (GGUF stores this as ssm_a)
  const float* dt_bias;  // [nv]
  const float* norm;     // [dv]: the gated norm's plain weight
  float eps;
  const float* state_in;  // [nv][dk][dv] before row 0
  float* state_out;       // [nv][dk][dv] after the last row; may equal state_in; null: not kept
  float* out;             // [rows - quiet][nv*dv] gated-norm readout of rows quiet..; null: none
  // The first `quiet` rows only advance the state (no readout; out and z start at row quiet).
  // They are the accepted rows of a verify block whose rollback was left to this call, so
  // that their recurrence runs while each head's state is in cache (models/qwen35/hybrid_state.h).
  int quiet = 0;
  // Where the state after the quiet rows goes (may equal state_in); null: not kept. At least
  // one of state_mid and state_out is set.
  float* state_mid = nullptr;
};
void gated_delta_net(const GatedDeltaArgs& a, ThreadPool* pool);

namespace ref {
void gated_delta_net(const GatedDeltaArgs& a);
void causal_conv_silu(const ShortConvArgs& a);
}

}  // namespace dflash
