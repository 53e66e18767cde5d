// The shared decoder forward for every target family; ArchSpec switches decide the details.
#include "models/transformer.h"

#include <algorithm>
#include <cmath>
#include <cstring>

#include "kernels/kernels.h"
#include "models/arch/arch_spec.h"
#include "models/decoder_blocks.h"
#include "util/error.h"

namespace dflash {

KVCache Transformer::make_cache(int capacity) const {
  return KVCache(cfg_.n_layers, cfg_.n_kv_heads, cfg_.head_dim, capacity, cache_type_);
}

void Transformer::set_cache_type(WType t) {
  KVCache(1, 1, cfg_.head_dim, 0, t);  // throws now, not at the first request, if t cannot work
  cache_type_ = t;
}

void Transformer::embed(int32_t token, float* out) const {
  if (token < 0 || token >= cfg_.vocab)
    throw Error("token id " + std::to_string(token) + " is outside the vocabulary (size " +
                std::to_string(cfg_.vocab) + ")");
  dequantize_row(embed_, token, out);
}

size_t Transformer::weight_bytes() const {
  size_t b = lm_head_.bytes();
  for (const auto& l : layers_)
    b += l.wq.bytes() + l.wk.bytes() + l.wv.bytes() + l.wo.bytes() + l.gate.bytes() + l.up.bytes() + l.down.bytes();
  return b;
}

void Transformer::logits_from_hidden(const float* h, int rows, float* logits, ThreadPool* pool) const {
  std::vector<float> normed(size_t(rows) * cfg_.hidden);
  rmsnorm(h, rows, cfg_.hidden, final_norm_.data(), float(cfg_.rms_eps), normed.data());
  matmul(normed.data(), rows, lm_head_, logits, pool);
}

void Transformer::forward(KVCache& cache, const ForwardArgs& a, ThreadPool* pool) const {
  const ModelConfig& c = cfg_;
  const int n = a.n, H = c.hidden, hd = c.head_dim;
  const int qd = c.n_heads * hd, kvd = c.n_kv_heads * hd;
  const int pos0 = cache.length();
  if (n <= 0) return;
  if (pos0 + n > cache.capacity())
    throw Error("context full: " + std::to_string(pos0 + n) + " tokens exceed the context size " +
                std::to_string(cache.capacity()));

  const LayerDims d{H, c.n_heads, c.n_kv_heads, hd, c.ffn, float(c.rms_eps), c.arch->qk_norm, c.attention_bias};
  std::vector<float> x(size_t(n) * H), h(size_t(n) * H), q(size_t(n) * qd), k(size_t(n) * kvd),
      v(size_t(n) * kvd), att(size_t(n) * qd), g, u;
  for (int i = 0; i < n; ++i) embed(a.tokens[i], x.data() + size_t(i) * H);

  // RoPE tables for this call's positions; each row's angles depend on its position only.
  std::vector<float> cosv, sinv;
  rope_tables(inv_freq_, pos0, n, c.rope_scaling.type == "yarn" ? float(c.rope_scaling.attention_factor) : 1.0f,
              cosv, sinv);
  std::vector<int> kbeg(static_cast<size_t>(n), 0), kend(static_cast<size_t>(n));
  for (int i = 0; i < n; ++i) kend[size_t(i)] = pos0 + i + 1;  // causal

  const size_t n_cap = a.capture_layers ? a.capture_layers->size() : 0;
  for (int l = 0; l < c.n_layers; ++l) {
    const LayerWeights& w = layers_[size_t(l)];
    rmsnorm(x.data(), n, H, w.attn_norm.data(), d.eps, h.data());
    project_qkv(w, d, h.data(), n, cosv.data(), sinv.data(), q.data(), k.data(), v.data(), pool);
    store_kv(cache, l, d, k.data(), v.data(), pos0, n);
    AttentionArgs aa{q.data(), n, c.n_heads, c.n_kv_heads, hd, nullptr, nullptr, 0,
                     kbeg.data(), kend.data(), 1.0f / std::sqrt(float(hd)), att.data()};
    cache.bind(l, aa);
    attention(aa, pool);
    matmul(att.data(), n, w.wo, h.data(), pool);
    for (size_t i = 0; i < x.size(); ++i) x[i] += h[i];
    mlp_residual(w, d, x.data(), n, h, g, u, pool);

    for (size_t s = 0; s < n_cap; ++s)
      if ((*a.capture_layers)[s] == l)
        for (int i = 0; i < n; ++i)
          std::memcpy(a.capture + (size_t(i) * n_cap + s) * H, x.data() + size_t(i) * H, sizeof(float) * H);
  }
  cache.set_length(pos0 + n);

  const int from = a.logits_from < 0 ? n - 1 : a.logits_from;
  if (a.logits && from < n) logits_from_hidden(x.data() + size_t(from) * H, n - from, a.logits, pool);
}

}  // namespace dflash
