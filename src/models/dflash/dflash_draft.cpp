// The DFlash draft forward: context injection and one bidirectional block.
#include "models/dflash/dflash_draft.h"

#include <algorithm>
#include <cmath>

#include "models/dense/decoder_blocks.h"
#include "util/error.h"
#include "util/timer.h"

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

size_t DFlashDraft::context_row_bytes() const {
  size_t b = fc_.bytes();
  for (const LayerWeights& l : layers_) b += l.wk.bytes() + l.wv.bytes();
  return b;
}

void DFlashDraft::add_context(SequenceState& state, const float* features, int n) const {
  DraftJob j;
  j.state = &state;
  j.context = features;
  j.context_n = n;
  context_rows({&j});
}

void DFlashDraft::context_rows(const std::vector<DraftJob*>& all) const {
  std::vector<DraftJob*> jobs;
  std::vector<Segment> seg;
  int n = 0;
  for (DraftJob* j : all) {
    if (j->context_n <= 0) continue;
    KVCache& cache = cache_of(*j->state);
    if (cache.length() + j->context_n > cache.capacity()) throw Error("draft context full");
    jobs.push_back(j);
    seg.push_back({n, j->context_n});
    n += j->context_n;
  }
  if (jobs.empty()) return;
  const Backend& be = *backend_;
  const DraftConfig& c = cfg_;
  const LayerDims d{c.hidden, c.n_heads, c.n_kv_heads, c.head_dim, c.ffn, float(c.rms_eps), true, false};
  const bool f16 = act_ == DraftActivations::F16;
  const size_t rows = size_t(n), kvd = size_t(c.n_kv_heads) * size_t(c.head_dim), half = size_t(c.head_dim / 2);
  // One job's taps are used where they are; several are stacked for one matmul over fc.
  const float* features = jobs[0]->context;
  if (jobs.size() > 1) {
    const size_t F = size_t(feature_dim());
    float* f = acts_.features.floats(be, rows * F);
    for (size_t i = 0; i < jobs.size(); ++i)
      std::copy(jobs[i]->context, jobs[i]->context + size_t(seg[i].n) * F, f + size_t(seg[i].off) * F);
    features = f;
  }
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
  for (size_t i = 0; i < jobs.size(); ++i)
    for (int r = 0; r < seg[i].n; ++r) pos[seg[i].off + r] = cache_of(*jobs[i]->state).length() + r;
  be.rope_tables(inv_freq_.data(), int(half), pos, n,
                 c.rope_scaling.type == "yarn" ? float(c.rope_scaling.attention_factor) : 1.0f, cosv, sinv);
  // The same context rows feed every layer, each through that layer's own k/v projections.
  for (int l = 0; l < c.n_layers; ++l) {
    project_qkv(be, layers_[size_t(l)], d, ctx, n, cosv, sinv, nullptr, k, v);
    if (f16) {
      be.round_to_f16(k, rows * kvd);
      be.round_to_f16(v, rows * kvd);
    }
    for (size_t i = 0; i < jobs.size(); ++i) {
      KVCache& cache = cache_of(*jobs[i]->state);
      const size_t o = size_t(seg[i].off) * kvd;
      cache.store(l, k + o, v + o, cache.length(), seg[i].n);
    }
  }
  for (size_t i = 0; i < jobs.size(); ++i) {
    KVCache& cache = cache_of(*jobs[i]->state);
    cache.set_length(cache.length() + seg[i].n);
  }
}

void DFlashDraft::block_hidden(SequenceState& state, int32_t first, int B, float* normed) const {
  DraftJob j;
  j.state = &state;
  j.first = first;
  j.B = B;
  blocks_hidden({&j}, normed);
}

void DFlashDraft::blocks_hidden(const std::vector<DraftJob*>& jobs, float* normed) const {
  const Backend& be = *backend_;
  const DraftConfig& c = cfg_;
  std::vector<Segment> seg;
  std::vector<int> start;
  int n = 0;
  for (const DraftJob* j : jobs) {  // batch_logits has refused two blocks of one sequence
    KVCache& cache = cache_of(*j->state);
    if (j->B < 2) throw Error("draft block of fewer than 2 rows");
    if (cache.length() + j->B > cache.capacity()) throw Error("draft context full");
    seg.push_back({n, j->B});
    start.push_back(cache.length());
    n += j->B;
  }
  const int H = c.hidden, hd = c.head_dim, half = hd / 2;
  const LayerDims d{H, c.n_heads, c.n_kv_heads, hd, c.ffn, float(c.rms_eps), true, false};
  const bool f16 = act_ == DraftActivations::F16;
  const size_t xn = size_t(n) * size_t(H), qd = size_t(c.n_heads) * hd, kvd = size_t(c.n_kv_heads) * hd;
  const DecoderRows a = acts_.layers.take(be, size_t(n), d);
  float *x = a.x, *h = a.h, *q = a.q, *k = a.k, *v = a.v, *att = a.att, *g = a.gate, *u = a.up;
  float *cosv = a.cos, *sinv = a.sin;
  int *pos = a.pos, *kbeg = a.kbeg, *kend = a.kend;
  for (size_t i = 0; i < jobs.size(); ++i) {
    float* xi = x + size_t(seg[i].off) * H;
    target_->embed(jobs[i]->first, xi);
    for (int r = 1; r < seg[i].n; ++r) target_->embed(c.mask_token_id, xi + size_t(r) * H);
    for (int r = 0; r < seg[i].n; ++r) pos[seg[i].off + r] = start[i] + r;
  }
  if (c.embed_scale != 1.0f) be.scale(x, xn, c.embed_scale);
  be.rope_tables(inv_freq_.data(), half, pos, n,
                 c.rope_scaling.type == "yarn" ? float(c.rope_scaling.attention_factor) : 1.0f, cosv, sinv);
  for (int l = 0; l < c.n_layers; ++l) {
    const LayerWeights& w = layers_[size_t(l)];
    // v1: every block row sees all context rows and the whole block (no mask inside it).
    const int win = c.window.empty() ? 0 : c.window[size_t(l)];
    const bool causal = !c.causal.empty() && c.causal[size_t(l)];
    for (size_t i = 0; i < jobs.size(); ++i)
      for (int r = 0; r < seg[i].n; ++r) {
        const int p = start[i] + r, end = start[i] + seg[i].n, row = seg[i].off + r;
        kbeg[row] = win > 0 ? std::max(0, p - win + 1) : 0;
        kend[row] = causal ? p + 1 : win > 0 ? std::min(end, p + win) : end;
      }
    be.rmsnorm(x, n, H, w.attn_norm.data(), d.eps, h);
    sublayer_in(l, 0, h, seg);
    project_qkv(be, w, d, h, n, cosv, sinv, q, k, v);
    // Each block attends to its own sequence's context (and itself) only.
    for (size_t i = 0; i < jobs.size(); ++i) {
      KVCache& cache = cache_of(*jobs[i]->state);
      const size_t o = size_t(seg[i].off);
      cache.store(l, k + o * kvd, v + o * kvd, start[i], seg[i].n);
      AttentionArgs aa{q + o * qd, seg[i].n, c.n_heads, c.n_kv_heads, hd, nullptr, nullptr, 0, kbeg + o, kend + o,
                       1.0f / std::sqrt(float(hd)), att + o * qd};
      cache.bind(l, aa);
      be.attention(aa);
    }
    be.matmul(att, n, w.wo, h);
    sublayer_out(l, 0, h, seg);
    if (f16) be.round_to_f16(h, xn);
    be.add(x, h, xn);
    if (f16) be.round_to_f16(x, xn);
    // The MLP residual of decoder_blocks' mlp_residual, op for op, with the hooks between.
    be.rmsnorm(x, n, H, w.ffn_norm.data(), d.eps, h);
    sublayer_in(l, 1, h, seg);
    be.matmul_multi(h, n, {{&w.gate, g}, {&w.up, u}});
    be.silu_mul(g, u, int64_t(n) * c.ffn, g);
    be.matmul(g, n, w.down, h);
    sublayer_out(l, 1, h, seg);
    be.add(x, h, xn);
    if (f16) be.round_to_f16(x, xn);
  }
  // Only context rows persist; the blocks' keys and values are dropped. Rows 1..B-1 of each
  // block are the proposals.
  size_t out = 0;
  for (size_t i = 0; i < jobs.size(); ++i) {
    cache_of(*jobs[i]->state).rollback(start[i]);
    const int m = seg[i].n - 1;
    be.rmsnorm(x + size_t(seg[i].off + 1) * H, m, H, norm_.data(), d.eps, normed + out * H);
    if (f16) be.round_to_f16(normed + out * H, size_t(m) * H);
    out += size_t(m);
  }
}

void DFlashDraft::propose(SequenceState& state, int32_t first, int B, float* logits) const {
  float* normed = acts_.normed.floats(*backend_, size_t(B - 1) * cfg_.hidden);
  block_hidden(state, first, B, normed);
  target_->lm_head_logits(normed, B - 1, logits);
}

const float* DFlashDraft::batch_logits(const std::vector<DraftJob*>& jobs, const float** normed_out) const {
  // Every job is checked before any state changes: a refused pass leaves every sequence as it was.
  for (size_t i = 0; i < jobs.size(); ++i) {
    const DraftJob* j = jobs[i];
    for (size_t e = 0; e < i; ++e)
      if (jobs[e]->state == j->state) throw Error("draft: two blocks of one sequence in one pass");
    if (j->B < 2) throw Error("draft block of fewer than 2 rows");
    if (j->state->length() + std::max(0, j->context_n) + j->B > j->state->capacity()) throw Error("draft context full");
  }
  const double t0 = now_seconds();
  context_rows(jobs);
  const double t1 = now_seconds();
  int ctx = 0, rows = 0;
  for (const DraftJob* j : jobs) {
    ctx += std::max(0, j->context_n);
    rows += j->B - 1;
  }
  float* normed = acts_.normed.floats(*backend_, size_t(rows) * cfg_.hidden);
  float* logits = acts_.logits.floats(*backend_, size_t(rows) * cfg_.vocab);
  blocks_hidden(jobs, normed);
  target_->lm_head_logits(normed, rows, logits);
  const double t2 = now_seconds();
  for (DraftJob* j : jobs) {
    j->context_s = ctx > 0 ? (t1 - t0) * std::max(0, j->context_n) / ctx : 0;
    j->block_s = (t2 - t1) * (j->B - 1) / rows;
  }
  *normed_out = normed;
  return logits;
}

void DFlashDraft::draft_batch(const std::vector<DraftJob*>& jobs) const {
  if (jobs.empty()) return;
  const float* normed = nullptr;
  const float* logits = batch_logits(jobs, &normed);
  const size_t V = size_t(cfg_.vocab);
  for (DraftJob* j : jobs) {
    const size_t n = size_t(j->B - 1) * V;
    std::copy(logits, logits + n, j->logits);
    logits += n;
  }
}

}  // namespace dflash
