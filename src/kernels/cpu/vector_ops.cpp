// The row-wise ops of vector_ops.h, each one plain loop in the order its definition states.
// Compiled without floating-point contraction (CMakeLists.txt), so a*b+c stays two roundings
// here as everywhere else.
#include "kernels/vector_ops.h"

#include <algorithm>
#include <cmath>
#include <numeric>
#include <vector>

#include "kernels/numeric.h"

namespace dflash {

void add_rows(float* x, const float* y, size_t n) {
  for (size_t i = 0; i < n; ++i) x[i] += y[i];
}

void add_bias_rows(float* x, int rows, const float* b, int n) {
  for (int r = 0; r < rows; ++r)
    for (int i = 0; i < n; ++i) x[size_t(r) * size_t(n) + size_t(i)] += b[i];
}

void scale_rows(float* x, size_t n, float s) {
  for (size_t i = 0; i < n; ++i) x[i] *= s;
}

void round_rows_to_f16(float* x, size_t n) {
  for (size_t i = 0; i < n; ++i) x[i] = f16_to_f32(f32_to_f16(x[i]));
}

void softcap_rows(float* x, size_t n, float cap) {
  for (size_t i = 0; i < n; ++i) x[i] = cap * std::tanh(x[i] / cap);
}

void sigmoid_gate_rows(float* x, const float* gate, size_t n) {
  for (size_t i = 0; i < n; ++i) x[i] = x[i] * (1.0f / (1.0f + std::exp(-gate[i])));
}

void rope_neox_partial_rows(float* x, int rows, int n_heads, int head_dim, int rot, const float* cos,
                            const float* sin) {
  const int half = rot / 2;
  for (int r = 0; r < rows; ++r) {
    const float* c = cos + size_t(r) * size_t(half);
    const float* s = sin + size_t(r) * size_t(half);
    for (int h = 0; h < n_heads; ++h) {
      float* v = x + (size_t(r) * size_t(n_heads) + size_t(h)) * size_t(head_dim);
      for (int i = 0; i < half; ++i) {
        const float a = v[i], b = v[i + half];
        v[i] = a * c[i] - b * s[i];
        v[i + half] = b * c[i] + a * s[i];
      }
    }
  }
}

bool all_finite_rows(const float* x, size_t n) {
  for (size_t i = 0; i < n; ++i)
    if (!std::isfinite(x[i])) return false;
  return true;
}

void rope_table_rows(const double* inv_freq, int half, const int* pos, int n, float mscale, float* cos, float* sin) {
  for (int i = 0; i < n; ++i)
    for (int j = 0; j < half; ++j) {
      const float ang = float(pos[i]) * float(inv_freq[j]);
      cos[size_t(i) * size_t(half) + size_t(j)] = std::cos(ang) * mscale;
      sin[size_t(i) * size_t(half) + size_t(j)] = std::sin(ang) * mscale;
    }
}

void causal_block_conv(const BlockConvArgs& a) {
  const int H = a.dim, K = a.taps, gs = a.group, G = H / gs;
  for (int t = 0; t < a.rows; ++t) {
    const float* dt = a.dyn + size_t(t) * a.dyn_stride;
    float* out = a.out + size_t(t) * size_t(H);
    for (int c = 0; c < H; ++c) {
      float acc = 0;
      for (int tap = 0; tap < K && tap <= t; ++tap)
        acc += (a.base[size_t(tap) * size_t(H) + size_t(c)] + dt[size_t(tap) * size_t(G) + size_t(c / gs)]) *
               a.in[size_t(t - tap) * size_t(H) + size_t(c)];
      out[c] = acc;
    }
  }
}

void edge_scores(const EdgeScoreArgs& a) {
  const size_t R = size_t(a.rank);
  std::vector<float> w(R);
  for (int i = 0; i < a.n_pred; ++i) {
    const float* p = a.pred + size_t(i) * R;
    for (size_t r = 0; r < R; ++r) w[r] = p[r] * a.h[r];
    for (int j = 0; j < a.n_cand; ++j) {
      const float* s = a.succ + size_t(j) * R;
      float acc = 0;
      for (size_t r = 0; r < R; ++r) acc += w[r] * s[r];
      a.out[size_t(i) * size_t(a.n_cand) + size_t(j)] = acc;
    }
  }
}

void top_k_ids(const float* x, int rows, int n, int k, int32_t* out) {
  std::vector<int32_t> idx(static_cast<size_t>(n));  // one id list for all rows (a vocabulary each)
  for (int r = 0; r < rows; ++r) {
    const float* l = x + size_t(r) * size_t(n);
    std::iota(idx.begin(), idx.end(), 0);
    std::partial_sort(idx.begin(), idx.begin() + k, idx.end(),
                      [&](int32_t a, int32_t b) { return l[a] > l[b] || (l[a] == l[b] && a < b); });
    std::copy(idx.begin(), idx.begin() + k, out + size_t(r) * size_t(k));
  }
}

}  // namespace dflash
