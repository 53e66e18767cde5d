#pragma once
// The per-row pieces of the Gated DeltaNet recurrence that the fast and the reference kernel
// share (kernels/gated_delta.h has the definitions): q/k normalisation, the gates, the gated
// RMSNorm readout, and the loop over rows of one value head. Scalar loops: they touch dk or dv
// values per row and head, next to the dk*dv of the state update. Only the state update (the
// `Update` callable) differs between the twins.
#include <cmath>
#include <vector>

#include "kernels/gated_delta.h"

namespace dflash::gdn {

// Largest head dim the kernels take (their scratch lives on the stack); loaders check it.
constexpr int kMaxHeadDim = 512;

inline float sum_squares(const float* x, int n) {
  float s = 0.0f;
  for (int i = 0; i < n; ++i) s = s + x[i] * x[i];
  return s;
}

// y = x * (1 / sqrt(sum x^2 + 1e-6)) * extra
inline void l2_normalize(const float* x, int n, float extra, float* y) {
  const float inv = 1.0f / std::sqrt(sum_squares(x, n) + 1e-6f);
  for (int i = 0; i < n; ++i) y[i] = x[i] * inv * extra;
}

inline float softplus(float x) { return x > 20.0f ? x : std::log1p(std::exp(x)); }
inline float sigmoid(float x) { return 1.0f / (1.0f + std::exp(-x)); }
inline float silu(float x) { return x / (1.0f + std::exp(-x)); }

// y[c] = (w[c] * (o[c] * r)) * silu(z[c]), r = 1 / sqrt(sum o^2 / n + eps)
inline void gated_rmsnorm(const float* o, const float* z, const float* w, int n, float eps, float* y) {
  const float r = 1.0f / std::sqrt(sum_squares(o, n) / float(n) + eps);
  for (int c = 0; c < n; ++c) y[c] = (w[c] * (o[c] * r)) * silu(z[c]);
}

// A head's state that nobody keeps (GatedDeltaArgs::state_out null): written here, one per
// thread, so that it stays in cache and never costs a store to memory.
inline float* scratch_head_state(size_t floats) {
  thread_local std::vector<float> s;
  if (s.size() < floats) s.resize(floats);
  return s.data();
}

// Where value head h's state lives around the rows of `a`: the quiet rows write state_mid (or
// state_out), the others state_out (or a scratch state when the final state is not kept).
struct HeadStates {
  size_t floats;  // dk * dv
  const float* in;
  float* mid;
  float* out;
  float* quiet_dst;
  float* loud_dst;
  HeadStates(const GatedDeltaArgs& a, int h) : floats(size_t(a.dk) * size_t(a.dv)) {
    in = a.state_in + size_t(h) * floats;
    mid = a.state_mid ? a.state_mid + size_t(h) * floats : nullptr;
    out = a.state_out ? a.state_out + size_t(h) * floats : nullptr;
    quiet_dst = mid ? mid : out;
    loud_dst = out ? out : scratch_head_state(floats);
  }
  float* dst(const GatedDeltaArgs& a, int t) const { return t < a.quiet ? quiet_dst : loud_dst; }
  // After the rows: states that no row wrote are copies of the state before them.
  void finish(const GatedDeltaArgs& a) const {
    auto copy = [&](const float* from, float* to) {
      if (to && to != from)
        for (size_t i = 0; i < floats; ++i) to[i] = from[i];
    };
    if (a.quiet == 0) copy(in, mid);
    if (a.rows == a.quiet) copy(a.quiet > 0 ? quiet_dst : in, out);
  }
};

// Row t of value head h, prepared: k^ (and q^ when the row has a readout), alpha and beta.
// Returns whether the row has a readout.
inline bool prepare_row(const GatedDeltaArgs& a, int h, int t, float* qh, float* kn, float& alpha, float& beta) {
  const int C = 2 * a.nk * a.dk + a.nv * a.dv;
  const int kh = h / (a.nv / a.nk);
  const bool readout = a.out && t >= a.quiet;
  const float* row = a.qkv + size_t(t) * size_t(C);
  if (readout) l2_normalize(row + size_t(kh) * a.dk, a.dk, 1.0f / std::sqrt(float(a.dk)), qh);
  l2_normalize(row + size_t(a.nk + kh) * a.dk, a.dk, 1.0f, kn);
  const size_t gi = size_t(t) * size_t(a.nv) + size_t(h);
  beta = sigmoid(a.b[gi]);
  alpha = std::exp(a.neg_a[h] * softplus(a.a[gi] + a.dt_bias[h]));
  return readout;
}

inline const float* row_v(const GatedDeltaArgs& a, int h, int t) {
  const int C = 2 * a.nk * a.dk + a.nv * a.dv;
  return a.qkv + size_t(t) * size_t(C) + 2 * a.nk * a.dk + size_t(h) * a.dv;
}

// The gated RMSNorm of row t's readout o[dv] into out.
inline void finish_readout(const GatedDeltaArgs& a, int h, int t, const float* o) {
  const size_t off = size_t(t - a.quiet) * size_t(a.nv) * a.dv + size_t(h) * a.dv;
  gated_rmsnorm(o, a.z + off, a.norm, a.dv, a.eps, a.out + off);
}

// Runs value head h over all rows of `a`, one row at a time over the whole state.
// update(s_in, s_out, q^, k^, v, alpha, beta, o) applies one row to the head's [dk][dv] state
// (s_in may equal s_out) and, when o is not null, writes the readout o[dv].
template <class Update>
void run_value_head(const GatedDeltaArgs& a, int h, Update&& update) {
  const HeadStates st(a, h);
  float qh[kMaxHeadDim] = {}, kn[kMaxHeadDim], o[kMaxHeadDim];  // q^ zeroed: read without a readout too
  const float* src = st.in;
  for (int t = 0; t < a.rows; ++t) {
    float alpha, beta;
    const bool readout = prepare_row(a, h, t, qh, kn, alpha, beta);
    float* dst = st.dst(a, t);
    update(src, dst, qh, kn, row_v(a, h, t), alpha, beta, readout ? o : nullptr);
    src = dst;
    if (readout) finish_readout(a, h, t, o);
  }
  st.finish(a);
}

}  // namespace dflash::gdn
