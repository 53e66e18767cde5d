// The DFlash draft forward: context injection and one bidirectional block.
#include "models/dflash_draft.h"

#include <cmath>

#include "kernels/kernels.h"
#include "kernels/numeric.h"
#include "models/decoder_blocks.h"
#include "util/error.h"

namespace dflash {

namespace {

// Emulates an fp16-activation engine: every stored activation is rounded to fp16, so values
// past 65504 become inf and the next norm turns them into NaN.
void round_fp16(float* x, size_t n) {
  for (size_t i = 0; i < n; ++i) x[i] = f16_to_f32(f32_to_f16(x[i]));
}

}  // namespace

KVCache DFlashDraft::make_cache(int capacity) const {
  return KVCache(cfg_.n_layers, cfg_.n_kv_heads, cfg_.head_dim, capacity);
}

void DFlashDraft::add_context(KVCache& cache, const float* features, int n, ThreadPool* pool) const {
  if (n <= 0) return;
  const DraftConfig& c = cfg_;
  const int pos0 = cache.length();
  if (pos0 + n > cache.capacity()) throw Error("draft context full");
  const LayerDims d{c.hidden, c.n_heads, c.n_kv_heads, c.head_dim, c.ffn, float(c.rms_eps), true, false};
  const bool f16 = act_ == DraftActivations::F16;
  std::vector<float> ctx(size_t(n) * c.hidden), k(size_t(n) * c.n_kv_heads * c.head_dim), v(k.size());
  matmul(features, n, fc_, ctx.data(), pool);
  if (f16) round_fp16(ctx.data(), ctx.size());
  rmsnorm(ctx.data(), n, c.hidden, hidden_norm_.data(), d.eps, ctx.data());
  if (f16) round_fp16(ctx.data(), ctx.size());
  std::vector<float> cosv, sinv;
  rope_tables(inv_freq_, pos0, n, c.rope_scaling.type == "yarn" ? float(c.rope_scaling.attention_factor) : 1.0f, cosv,
              sinv);
  // The same context rows feed every layer, each through that layer's own k/v projections.
  for (int l = 0; l < c.n_layers; ++l) {
    project_qkv(layers_[size_t(l)], d, ctx.data(), n, cosv.data(), sinv.data(), nullptr, k.data(), v.data(), pool);
    if (f16) {
      round_fp16(k.data(), k.size());
      round_fp16(v.data(), v.size());
    }
    store_kv(cache, l, d, k.data(), v.data(), pos0, n);
  }
  cache.set_length(pos0 + n);
}

void DFlashDraft::propose(KVCache& cache, int32_t first, int B, float* logits, ThreadPool* pool) const {
  const DraftConfig& c = cfg_;
  const int start = cache.length();
  if (start + B > cache.capacity()) throw Error("draft context full");
  const int H = c.hidden, hd = c.head_dim, qd = c.n_heads * hd, kvd = c.n_kv_heads * hd;
  const LayerDims d{H, c.n_heads, c.n_kv_heads, hd, c.ffn, float(c.rms_eps), true, false};
  const bool f16 = act_ == DraftActivations::F16;
  std::vector<float> x(size_t(B) * H), h(x.size()), q(size_t(B) * qd), k(size_t(B) * kvd), v(k.size()),
      att(q.size()), g, u;
  target_->embed(first, x.data());
  for (int i = 1; i < B; ++i) target_->embed(c.mask_token_id, x.data() + size_t(i) * H);
  std::vector<float> cosv, sinv;
  rope_tables(inv_freq_, start, B, c.rope_scaling.type == "yarn" ? float(c.rope_scaling.attention_factor) : 1.0f, cosv,
              sinv);
  // Every block row sees all context rows and the whole block: no mask inside the block.
  std::vector<int> kbeg(static_cast<size_t>(B), 0), kend(static_cast<size_t>(B), start + B);
  for (int l = 0; l < c.n_layers; ++l) {
    const LayerWeights& w = layers_[size_t(l)];
    rmsnorm(x.data(), B, H, w.attn_norm.data(), d.eps, h.data());
    project_qkv(w, d, h.data(), B, cosv.data(), sinv.data(), q.data(), k.data(), v.data(), pool);
    store_kv(cache, l, d, k.data(), v.data(), start, B);
    AttentionArgs aa{q.data(), B, c.n_heads, c.n_kv_heads, hd, cache.k(l), cache.v(l), cache.capacity(),
                     kbeg.data(), kend.data(), 1.0f / std::sqrt(float(hd)), att.data()};
    attention(aa, pool);
    matmul(att.data(), B, w.wo, h.data(), pool);
    if (f16) round_fp16(h.data(), h.size());
    for (size_t i = 0; i < x.size(); ++i) x[i] += h[i];
    if (f16) round_fp16(x.data(), x.size());
    mlp_residual(w, d, x.data(), B, h, g, u, pool);
    if (f16) round_fp16(x.data(), x.size());
  }
  // Only context rows persist; the block's keys and values are dropped.
  cache.rollback(start);
  std::vector<float> normed(size_t(B - 1) * H);
  rmsnorm(x.data() + H, B - 1, H, norm_.data(), d.eps, normed.data());
  if (f16) round_fp16(normed.data(), normed.size());
  matmul(normed.data(), B - 1, target_->lm_head(), logits, pool);
}

}  // namespace dflash
