// The DFlash draft forward: context injection and one bidirectional block.
#include "models/dflash/dflash_draft.h"

#include <algorithm>
#include <cmath>

#include "models/dense/decoder_blocks.h"
#include "util/error.h"

namespace dflash {

KVCache& DFlashDraft::cache_of(SequenceState& state) {
  auto* c = dynamic_cast<KVCache*>(&state);
  if (!c) throw Error("draft: a sequence state that the draft did not make");
  return *c;
}

std::unique_ptr<SequenceState> DFlashDraft::new_state(int capacity) const {
  return std::make_unique<KVCache>(cfg_.n_layers, cfg_.n_kv_heads, cfg_.head_dim, capacity, cache_type_, backend_);
}

void DFlashDraft::set_cache_type(WType t) {
  check_kv_type(t, cfg_.head_dim);  // throws now if t cannot work with this head_dim
  cache_type_ = t;
}

void DFlashDraft::add_context(SequenceState& state, const float* features, int n) const {
  if (n <= 0) return;
  KVCache& cache = cache_of(state);
  const Backend& be = *backend_;
  const DraftConfig& c = cfg_;
  const int pos0 = cache.length();
  if (pos0 + n > cache.capacity()) throw Error("draft context full");
  const LayerDims d{c.hidden, c.n_heads, c.n_kv_heads, c.head_dim, c.ffn, float(c.rms_eps), true, false};
  const bool f16 = act_ == DraftActivations::F16;
  const size_t rows = size_t(n), kvd = size_t(c.n_kv_heads) * size_t(c.head_dim), half = size_t(c.head_dim / 2);
  float* ctx = acts_.ctx.floats(be, rows * c.hidden);
  // Context rows need only keys and values: the layers' k/v/RoPE buffers, not the rest.
  float* k = acts_.layers.k.floats(be, rows * kvd);
  float* v = acts_.layers.v.floats(be, rows * kvd);
  float* cosv = acts_.layers.cos.floats(be, rows * half);
  float* sinv = acts_.layers.sin.floats(be, rows * half);
  int* pos = acts_.layers.pos.ints(be, rows);
  be.matmul(features, n, fc_, ctx);
  if (f16) be.round_to_f16(ctx, rows * c.hidden);
  be.rmsnorm(ctx, n, c.hidden, hidden_norm_.data(), d.eps, ctx);
  if (f16) be.round_to_f16(ctx, rows * c.hidden);
  for (int i = 0; i < n; ++i) pos[i] = pos0 + i;
  be.rope_tables(inv_freq_.data(), int(half), pos, n,
                 c.rope_scaling.type == "yarn" ? float(c.rope_scaling.attention_factor) : 1.0f, cosv, sinv);
  // The same context rows feed every layer, each through that layer's own k/v projections.
  for (int l = 0; l < c.n_layers; ++l) {
    project_qkv(be, layers_[size_t(l)], d, ctx, n, cosv, sinv, nullptr, k, v);
    if (f16) {
      be.round_to_f16(k, rows * kvd);
      be.round_to_f16(v, rows * kvd);
    }
    cache.store(l, k, v, pos0, n);
  }
  cache.set_length(pos0 + n);
}

void DFlashDraft::block_hidden(SequenceState& state, int32_t first, int B, float* normed) const {
  KVCache& cache = cache_of(state);
  const Backend& be = *backend_;
  const DraftConfig& c = cfg_;
  const int start = cache.length();
  if (start + B > cache.capacity()) throw Error("draft context full");
  const int H = c.hidden, hd = c.head_dim, half = hd / 2;
  const LayerDims d{H, c.n_heads, c.n_kv_heads, hd, c.ffn, float(c.rms_eps), true, false};
  const bool f16 = act_ == DraftActivations::F16;
  const size_t xn = size_t(B) * size_t(H);
  const DecoderRows a = acts_.layers.take(be, size_t(B), d);
  float *x = a.x, *h = a.h, *q = a.q, *k = a.k, *v = a.v, *att = a.att, *g = a.gate, *u = a.up;
  float *cosv = a.cos, *sinv = a.sin;
  int *pos = a.pos, *kbeg = a.kbeg, *kend = a.kend;
  target_->embed(first, x);
  for (int i = 1; i < B; ++i) target_->embed(c.mask_token_id, x + size_t(i) * H);
  if (c.embed_scale != 1.0f) be.scale(x, xn, c.embed_scale);
  for (int i = 0; i < B; ++i) pos[i] = start + i;
  be.rope_tables(inv_freq_.data(), half, pos, B,
                 c.rope_scaling.type == "yarn" ? float(c.rope_scaling.attention_factor) : 1.0f, cosv, sinv);
  for (int l = 0; l < c.n_layers; ++l) {
    const LayerWeights& w = layers_[size_t(l)];
    // v1: every block row sees all context rows and the whole block (no mask inside it).
    const int win = c.window.empty() ? 0 : c.window[size_t(l)];
    const bool causal = !c.causal.empty() && c.causal[size_t(l)];
    for (int i = 0; i < B; ++i) {
      const int p = start + i;
      kbeg[i] = win > 0 ? std::max(0, p - win + 1) : 0;
      kend[i] = causal ? p + 1 : win > 0 ? std::min(start + B, p + win) : start + B;
    }
    be.rmsnorm(x, B, H, w.attn_norm.data(), d.eps, h);
    sublayer_in(l, 0, h, B);
    project_qkv(be, w, d, h, B, cosv, sinv, q, k, v);
    cache.store(l, k, v, start, B);
    AttentionArgs aa{q, B, c.n_heads, c.n_kv_heads, hd, nullptr, nullptr, 0, kbeg, kend, 1.0f / std::sqrt(float(hd)),
                     att};
    cache.bind(l, aa);
    be.attention(aa);
    be.matmul(att, B, w.wo, h);
    sublayer_out(l, 0, h, B);
    if (f16) be.round_to_f16(h, xn);
    be.add(x, h, xn);
    if (f16) be.round_to_f16(x, xn);
    // The MLP residual of decoder_blocks' mlp_residual, op for op, with the hooks between.
    be.rmsnorm(x, B, H, w.ffn_norm.data(), d.eps, h);
    sublayer_in(l, 1, h, B);
    be.matmul_multi(h, B, {{&w.gate, g}, {&w.up, u}});
    be.silu_mul(g, u, int64_t(B) * c.ffn, g);
    be.matmul(g, B, w.down, h);
    sublayer_out(l, 1, h, B);
    be.add(x, h, xn);
    if (f16) be.round_to_f16(x, xn);
  }
  // Only context rows persist; the block's keys and values are dropped.
  cache.rollback(start);
  be.rmsnorm(x + H, B - 1, H, norm_.data(), d.eps, normed);
  if (f16) be.round_to_f16(normed, size_t(B - 1) * H);
}

void DFlashDraft::propose(SequenceState& state, int32_t first, int B, float* logits) const {
  float* normed = acts_.normed.floats(*backend_, size_t(B - 1) * cfg_.hidden);
  block_hidden(state, first, B, normed);
  target_->lm_head_logits(normed, B - 1, logits);
}

}  // namespace dflash
