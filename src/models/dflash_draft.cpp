// The DFlash draft forward: context injection and one bidirectional block.
#include "models/dflash_draft.h"

#include <algorithm>
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
  return KVCache(cfg_.n_layers, cfg_.n_kv_heads, cfg_.head_dim, capacity, cache_type_);
}

void DFlashDraft::set_cache_type(WType t) {
  KVCache(1, 1, cfg_.head_dim, 0, t);  // throws now if t cannot work with this head_dim
  cache_type_ = t;
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

void DFlashDraft::block_hidden(KVCache& cache, int32_t first, int B, float* normed, ThreadPool* pool) const {
  const DraftConfig& c = cfg_;
  const int start = cache.length();
  if (start + B > cache.capacity()) throw Error("draft context full");
  const int H = c.hidden, hd = c.head_dim, qd = c.n_heads * hd, kvd = c.n_kv_heads * hd;
  const LayerDims d{H, c.n_heads, c.n_kv_heads, hd, c.ffn, float(c.rms_eps), true, false};
  const bool f16 = act_ == DraftActivations::F16;
  std::vector<float> x(size_t(B) * H), h(x.size()), q(size_t(B) * qd), k(size_t(B) * kvd), v(k.size()),
      att(q.size()), g(size_t(B) * c.ffn), u(g.size()), scratch;
  target_->embed(first, x.data());
  for (int i = 1; i < B; ++i) target_->embed(c.mask_token_id, x.data() + size_t(i) * H);
  if (c.embed_scale != 1.0f)
    for (float& e : x) e *= c.embed_scale;
  std::vector<float> cosv, sinv;
  rope_tables(inv_freq_, start, B, c.rope_scaling.type == "yarn" ? float(c.rope_scaling.attention_factor) : 1.0f, cosv,
              sinv);
  std::vector<int> kbeg(static_cast<size_t>(B)), kend(static_cast<size_t>(B));
  for (int l = 0; l < c.n_layers; ++l) {
    const LayerWeights& w = layers_[size_t(l)];
    // v1: every block row sees all context rows and the whole block (no mask inside it).
    const int win = c.window.empty() ? 0 : c.window[size_t(l)];
    const bool causal = !c.causal.empty() && c.causal[size_t(l)];
    for (int i = 0; i < B; ++i) {
      const int p = start + i;
      kbeg[size_t(i)] = win > 0 ? std::max(0, p - win + 1) : 0;
      kend[size_t(i)] = causal ? p + 1 : win > 0 ? std::min(start + B, p + win) : start + B;
    }
    rmsnorm(x.data(), B, H, w.attn_norm.data(), d.eps, h.data());
    sublayer_in(l, 0, h.data(), B, scratch, pool);
    project_qkv(w, d, h.data(), B, cosv.data(), sinv.data(), q.data(), k.data(), v.data(), pool);
    store_kv(cache, l, d, k.data(), v.data(), start, B);
    AttentionArgs aa{q.data(), B, c.n_heads, c.n_kv_heads, hd, nullptr, nullptr, 0,
                     kbeg.data(), kend.data(), 1.0f / std::sqrt(float(hd)), att.data()};
    cache.bind(l, aa);
    attention(aa, pool);
    matmul(att.data(), B, w.wo, h.data(), pool);
    sublayer_out(l, 0, h.data(), B, scratch);
    if (f16) round_fp16(h.data(), h.size());
    for (size_t i = 0; i < x.size(); ++i) x[i] += h[i];
    if (f16) round_fp16(x.data(), x.size());
    // The MLP residual of decoder_blocks' mlp_residual, op for op, with the hooks between.
    rmsnorm(x.data(), B, H, w.ffn_norm.data(), d.eps, h.data());
    sublayer_in(l, 1, h.data(), B, scratch, pool);
    matmul_multi(h.data(), B, {{&w.gate, g.data()}, {&w.up, u.data()}}, pool);
    silu_mul(g.data(), u.data(), int64_t(B) * c.ffn, g.data());
    matmul(g.data(), B, w.down, h.data(), pool);
    sublayer_out(l, 1, h.data(), B, scratch);
    for (size_t i = 0; i < x.size(); ++i) x[i] += h[i];
    if (f16) round_fp16(x.data(), x.size());
  }
  // Only context rows persist; the block's keys and values are dropped.
  cache.rollback(start);
  rmsnorm(x.data() + H, B - 1, H, norm_.data(), d.eps, normed);
  if (f16) round_fp16(normed, size_t(B - 1) * H);
}

void DFlashDraft::propose(KVCache& cache, int32_t first, int B, float* logits, ThreadPool* pool) const {
  std::vector<float> normed(size_t(B - 1) * cfg_.hidden);
  block_hidden(cache, first, B, normed.data(), pool);
  matmul(normed.data(), B - 1, target_->lm_head(), logits, pool);
}

}  // namespace dflash
