// The dense family's forward: embedding, then per layer RMSNorm -> attention over the KV cache
// -> residual -> RMSNorm -> SwiGLU MLP -> residual, then the final norm and the LM head.
// Several sequences share one pass: their rows are stacked for every matmul and norm, and
// each attends to its own cache.
#include "models/dense/dense_model.h"

#include <cmath>
#include <cstring>

#include "models/dense/arch_spec.h"
#include "models/batch_rows.h"
#include "models/dense/decoder_blocks.h"
#include "util/error.h"

namespace dflash {

void DenseModel::finish_load() {
  for (int l = 0; l < cfg_.n_layers; ++l)
    if (!cfg_.layer_kinds.empty() && cfg_.layer_kinds[size_t(l)] != LayerKind::Attention)
      throw Error("layer " + std::to_string(l) + " is " + layer_kind_name(cfg_.layer_kinds[size_t(l)]) +
                  ", which the dense family (" + cfg_.architecture + ") does not have");
  cfg_.layer_kinds.assign(size_t(cfg_.n_layers), LayerKind::Attention);
  inv_freq_ = rope_inv_freq(cfg_);
}

std::unique_ptr<SequenceState> DenseModel::new_state(int capacity) const {
  return std::make_unique<KVCache>(cfg_.n_layers, cfg_.n_kv_heads, cfg_.head_dim, capacity, cache_type_,
                                   backend_.get());
}

void DenseModel::set_cache_type(WType t) {
  check_kv_type(t, cfg_.head_dim);  // throws now, not at the first request, if t cannot work
  cache_type_ = t;
}

void DenseModel::embed(int32_t token, float* out) const {
  if (token < 0 || token >= cfg_.vocab)
    throw Error("token id " + std::to_string(token) + " is outside the vocabulary (size " +
                std::to_string(cfg_.vocab) + ")");
  backend_->dequantize_row(embed_, token, out);
}

size_t DenseModel::weight_bytes() const {
  size_t b = lm_head_.bytes();
  for (const auto& l : layers_)
    b += l.wq.bytes() + l.wk.bytes() + l.wv.bytes() + l.wo.bytes() + l.gate.bytes() + l.up.bytes() + l.down.bytes();
  return b;
}

void DenseModel::logits_from_hidden(const float* h, int rows, float* logits) const {
  float* normed = normed_.floats(*backend_, size_t(rows) * size_t(cfg_.hidden));
  backend_->rmsnorm(h, rows, cfg_.hidden, final_norm_.data(), float(cfg_.rms_eps), normed);
  backend_->matmul(normed, rows, lm_head_, logits);
}

void DenseModel::lm_head_logits(const float* normed, int rows, float* logits) const {
  backend_->matmul(normed, rows, lm_head_, logits);
}

void DenseModel::forward_batch(std::span<SequenceRows> batch) const {
  const ModelConfig& c = cfg_;
  const Backend& be = *backend_;
  const int H = c.hidden, hd = c.head_dim, half = hd / 2;
  const int qd = c.n_heads * hd, kvd = c.n_kv_heads * hd;
  // Check every sequence before any state changes.
  const size_t N = check_batch(batch, c.vocab, [](const SequenceState* st) { return dynamic_cast<const KVCache*>(st) != nullptr; });
  if (N == 0) return;

  const LayerDims d{H, c.n_heads, c.n_kv_heads, hd, c.ffn, float(c.rms_eps), c.arch->qk_norm, c.qkv_bias};
  const DecoderRows a = act_.take(be, N, d);
  float *x = a.x, *h = a.h, *q = a.q, *k = a.k, *v = a.v, *att = a.att, *g = a.gate, *u = a.up;
  float *cosv = a.cos, *sinv = a.sin;
  int *pos = a.pos, *kbeg = a.kbeg, *kend = a.kend;

  // Row r of the stack: its token's embedding, its position, its causal key range.
  size_t r = 0;
  for (const SequenceRows& s : batch) {
    const int pos0 = s.state->length();
    for (int i = 0; i < s.rows.n; ++i, ++r) {
      embed(s.rows.tokens[i], x + r * H);
      pos[r] = pos0 + i;
      kbeg[r] = 0;
      kend[r] = pos0 + i + 1;
    }
  }
  // Each row's angles depend on its position only.
  be.rope_tables(inv_freq_.data(), half, pos, int(N), c.rope_scaling.type == "yarn" ? float(c.rope_scaling.attention_factor) : 1.0f,
                 cosv, sinv);

  const float scale = 1.0f / std::sqrt(float(hd));
  for (int l = 0; l < c.n_layers; ++l) {
    const LayerWeights& w = layers_[size_t(l)];
    be.rmsnorm(x, int(N), H, w.attn_norm.data(), d.eps, h);
    project_qkv(be, w, d, h, int(N), cosv, sinv, q, k, v);
    r = 0;
    for (const SequenceRows& s : batch) {
      auto& cache = static_cast<KVCache&>(*s.state);
      const int n = s.rows.n;
      if (n == 0) continue;
      cache.store(l, k + r * kvd, v + r * kvd, cache.length(), n);
      AttentionArgs aa{q + r * qd, n, c.n_heads, c.n_kv_heads, hd, nullptr, nullptr, 0, kbeg + r, kend + r, scale,
                       att + r * qd};
      cache.bind(l, aa);
      be.attention(aa);
      r += size_t(n);
    }
    be.matmul(att, int(N), w.wo, h);
    be.add(x, h, N * H);
    mlp_residual(be, w, d, x, int(N), h, g, u);

    capture_layer(batch, l, x, H);
  }

  for (const SequenceRows& s : batch) {
    auto& cache = static_cast<KVCache&>(*s.state);
    cache.set_length(cache.length() + s.rows.n);
  }
  batch_logits(batch, x, H, c.vocab, [this](const float* hs, int rows, float* out) { logits_from_hidden(hs, rows, out); },
               logits_buf_);
}

}  // namespace dflash
