#include "models/decoder_blocks.h"

#include <cmath>
#include <cstring>

#include "kernels/kernels.h"

namespace dflash {

void rope_tables(const std::vector<double>& inv_freq, int pos0, int n, float mscale, std::vector<float>& cos,
                 std::vector<float>& sin) {
  const size_t half = inv_freq.size();
  cos.resize(size_t(n) * half);
  sin.resize(size_t(n) * half);
  for (int i = 0; i < n; ++i)
    for (size_t j = 0; j < half; ++j) {
      const float ang = float(pos0 + i) * float(inv_freq[j]);
      cos[size_t(i) * half + j] = std::cos(ang) * mscale;
      sin[size_t(i) * half + j] = std::sin(ang) * mscale;
    }
}

static void add_bias(float* x, int rows, const std::vector<float>& b) {
  const size_t n = b.size();
  for (int r = 0; r < rows; ++r)
    for (size_t i = 0; i < n; ++i) x[size_t(r) * n + i] += b[i];
}

void project_qkv(const LayerWeights& w, const LayerDims& d, const float* h, int n, const float* cos, const float* sin,
                 float* q, float* k, float* v, ThreadPool* pool) {
  if (q) matmul_multi(h, n, {{&w.wq, q}, {&w.wk, k}, {&w.wv, v}}, pool);
  else matmul_multi(h, n, {{&w.wk, k}, {&w.wv, v}}, pool);
  if (d.bias) {
    if (q) add_bias(q, n, w.bq);
    add_bias(k, n, w.bk);
    add_bias(v, n, w.bv);
  }
  if (d.qk_norm) {
    if (q) rmsnorm(q, n * d.n_heads, d.head_dim, w.q_norm.data(), d.eps, q);
    rmsnorm(k, n * d.n_kv_heads, d.head_dim, w.k_norm.data(), d.eps, k);
  }
  if (q) rope_neox(q, n, d.n_heads, d.head_dim, cos, sin);
  rope_neox(k, n, d.n_kv_heads, d.head_dim, cos, sin);
}

void store_kv(KVCache& cache, int layer, const LayerDims& d, const float* k, const float* v, int pos0, int n) {
  (void)d;  // the cache knows its own shape and element format
  cache.store(layer, k, v, pos0, n);
}

void mlp_residual(const LayerWeights& w, const LayerDims& d, float* x, int n, std::vector<float>& h,
                  std::vector<float>& g, std::vector<float>& u, ThreadPool* pool) {
  h.resize(size_t(n) * d.hidden);
  g.resize(size_t(n) * d.ffn);
  u.resize(size_t(n) * d.ffn);
  rmsnorm(x, n, d.hidden, w.ffn_norm.data(), d.eps, h.data());
  matmul_multi(h.data(), n, {{&w.gate, g.data()}, {&w.up, u.data()}}, pool);
  silu_mul(g.data(), u.data(), int64_t(n) * d.ffn, g.data());
  matmul(g.data(), n, w.down, h.data(), pool);
  for (size_t i = 0; i < size_t(n) * d.hidden; ++i) x[i] += h[i];
}

}  // namespace dflash
