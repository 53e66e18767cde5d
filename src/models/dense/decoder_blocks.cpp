#include "models/dense/decoder_blocks.h"

namespace dflash {

void prepare_layer(const Backend& be, LayerWeights& w) {
  for (WeightMatrix* m : {&w.wq, &w.wk, &w.wv, &w.wo, &w.gate, &w.up, &w.down}) be.prepare_weight(*m);
}

LayerWeights random_layer_weights(const Backend& be, uint64_t& state, int64_t hidden, int n_heads, int n_kv_heads,
                                  int head_dim, int64_t ffn, WType type, bool qk_norm, bool bias) {
  const int64_t H = hidden, qd = int64_t(n_heads) * head_dim, kvd = int64_t(n_kv_heads) * head_dim;
  auto mat = [&](int64_t rows, int64_t cols) { return random_weight_matrix(state, rows, cols, type); };
  LayerWeights w;
  w.wq = mat(qd, H);
  w.wk = mat(kvd, H);
  w.wv = mat(kvd, H);
  w.wo = mat(H, qd);
  w.gate = mat(ffn, H);
  w.up = mat(ffn, H);
  w.down = mat(H, ffn);
  w.attn_norm.assign(size_t(H), 1.0f);
  w.ffn_norm.assign(size_t(H), 1.0f);
  if (qk_norm) w.q_norm = w.k_norm = std::vector<float>(size_t(head_dim), 1.0f);
  if (bias) {
    w.bq.assign(size_t(qd), 0.0f);
    w.bk.assign(size_t(kvd), 0.0f);
    w.bv.assign(size_t(kvd), 0.0f);
  }
  prepare_layer(be, w);
  return w;
}

DecoderRows DecoderActivations::take(const Backend& be, size_t rows, const LayerDims& d) {
  const size_t qd = size_t(d.n_heads) * d.head_dim, kvd = size_t(d.n_kv_heads) * d.head_dim;
  const size_t half = size_t(d.head_dim / 2);
  return {x.floats(be, rows * d.hidden), h.floats(be, rows * d.hidden), q.floats(be, rows * qd),
          k.floats(be, rows * kvd),      v.floats(be, rows * kvd),      att.floats(be, rows * qd),
          gate.floats(be, rows * d.ffn), up.floats(be, rows * d.ffn),   cos.floats(be, rows * half),
          sin.floats(be, rows * half),   pos.ints(be, rows),            kbeg.ints(be, rows),
          kend.ints(be, rows)};
}

void project_qkv(const Backend& be, const LayerWeights& w, const LayerDims& d, const float* h, int n, const float* cos,
                 const float* sin, float* q, float* k, float* v) {
  if (q) be.matmul_multi(h, n, {{&w.wq, q}, {&w.wk, k}, {&w.wv, v}});
  else be.matmul_multi(h, n, {{&w.wk, k}, {&w.wv, v}});
  if (d.qkv_bias) {
    if (q) be.add_bias(q, n, w.bq.data(), int(w.bq.size()));
    be.add_bias(k, n, w.bk.data(), int(w.bk.size()));
    be.add_bias(v, n, w.bv.data(), int(w.bv.size()));
  }
  if (d.qk_norm) {
    if (q) be.rmsnorm(q, n * d.n_heads, d.head_dim, w.q_norm.data(), d.eps, q);
    be.rmsnorm(k, n * d.n_kv_heads, d.head_dim, w.k_norm.data(), d.eps, k);
  }
  if (q) be.rope_neox(q, n, d.n_heads, d.head_dim, cos, sin);
  be.rope_neox(k, n, d.n_kv_heads, d.head_dim, cos, sin);
}

void mlp_residual(const Backend& be, const LayerWeights& w, const LayerDims& d, float* x, int n, float* h, float* g,
                  float* u) {
  be.rmsnorm(x, n, d.hidden, w.ffn_norm.data(), d.eps, h);
  be.matmul_multi(h, n, {{&w.gate, g}, {&w.up, u}});
  be.silu_mul(g, u, int64_t(n) * d.ffn, g);
  be.matmul(g, n, w.down, h);
  be.add(x, h, size_t(n) * size_t(d.hidden));
}

}  // namespace dflash
