// The hybrid family's forward (../shared/qwen35-format.md §3): embedding, then per layer
// ZNorm -> gated attention or Gated DeltaNet -> residual -> ZNorm -> SwiGLU MLP -> residual,
// then the final norm and the LM head. Several sequences share one pass: their rows are
// stacked for every matmul and norm; attention, the convolution and the recurrence run per
// sequence over its own state, one row at a time in order (kernels/gated_delta.h), so a
// position's logits are the same bits in decode, verify and any prefill chunk.
#include <cmath>
#include <cstring>

#include "models/batch_rows.h"
#include "models/qwen35/qwen35_model.h"
#include "util/error.h"

namespace dflash {

std::unique_ptr<SequenceState> Qwen35Model::new_state(int capacity) const {
  const LinearReplay& replay = *this;  // a private base: converted here, where it is accessible
  return std::make_unique<HybridState>(cfg_, capacity, cache_type_, *backend_, replay);
}

void Qwen35Model::set_cache_type(WType t) {
  check_kv_type(t, cfg_.head_dim);
  cache_type_ = t;
}

void Qwen35Model::embed(int32_t token, float* out) const {
  if (token < 0 || token >= cfg_.vocab)
    throw Error("token id " + std::to_string(token) + " is outside the vocabulary (size " +
                std::to_string(cfg_.vocab) + ")");
  backend_->dequantize_row(embed_, token, out);
}

size_t Qwen35Model::weight_bytes() const {
  size_t b = lm_head_.bytes();
  for (const auto& l : layers_)
    for (const WeightMatrix* m : {&l.mlp.wq, &l.mlp.wk, &l.mlp.wv, &l.mlp.wo, &l.mlp.gate, &l.mlp.up, &l.mlp.down,
                                  &l.in_qkv, &l.in_z, &l.in_b, &l.in_a, &l.out_proj})
      if (m->rows > 0) b += m->bytes();
  return b;
}

void Qwen35Model::logits_from_hidden(const float* h, int rows, float* logits) const {
  float* normed = normed_.floats(*backend_, size_t(rows) * size_t(cfg_.hidden));
  backend_->rmsnorm(h, rows, cfg_.hidden, final_norm_.data(), float(cfg_.rms_eps), normed);
  backend_->matmul(normed, rows, lm_head_, logits);
}

void Qwen35Model::lm_head_logits(const float* normed, int rows, float* logits) const {
  backend_->matmul(normed, rows, lm_head_, logits);
}

void Qwen35Model::attention_layer(const HybridLayer& w, int slot, std::span<SequenceRows> batch, int N) const {
  const Backend& be = *backend_;
  const ModelConfig& c = cfg_;
  const int hd = c.head_dim, qd = c.n_heads * hd, kvd = c.n_kv_heads * hd, R = c.rope_dims, half = R / 2;
  const size_t n = size_t(N);
  float* h = act_.h.floats(be, n * c.hidden);
  float* p = act_.p.floats(be, n * 2 * qd);
  float* q = act_.q.floats(be, n * qd);
  float* gate = act_.gate.floats(be, n * qd);
  float* k = act_.k.floats(be, n * kvd);
  float* v = act_.v.floats(be, n * kvd);
  float* att = act_.att.floats(be, n * qd);
  const float* cosv = act_.cos.floats(be, n * half);
  const float* sinv = act_.sin.floats(be, n * half);
  const int* kbeg = act_.kbeg.ints(be, n);
  const int* kend = act_.kend.ints(be, n);
  const float eps = float(c.rms_eps);

  be.matmul_multi(h, N, {{&w.mlp.wq, p}, {&w.mlp.wk, k}, {&w.mlp.wv, v}});
  // q_proj rows hold each head's query then its gate (§2.2): split them apart.
  for (size_t r = 0; r < n; ++r)
    for (int hh = 0; hh < c.n_heads; ++hh) {
      const float* src = p + (r * c.n_heads + size_t(hh)) * 2 * hd;
      std::memcpy(q + (r * c.n_heads + size_t(hh)) * hd, src, sizeof(float) * hd);
      std::memcpy(gate + (r * c.n_heads + size_t(hh)) * hd, src + hd, sizeof(float) * hd);
    }
  be.rmsnorm(q, N * c.n_heads, hd, w.mlp.q_norm.data(), eps, q);
  be.rmsnorm(k, N * c.n_kv_heads, hd, w.mlp.k_norm.data(), eps, k);
  be.rope_neox_partial(q, N, c.n_heads, hd, R, cosv, sinv);
  be.rope_neox_partial(k, N, c.n_kv_heads, hd, R, cosv, sinv);
  const float scale = 1.0f / std::sqrt(float(hd));
  size_t r = 0;
  for (const SequenceRows& s : batch) {
    const int rows = s.rows.n;
    if (rows == 0) continue;
    KVCache& cache = static_cast<HybridState&>(*s.state).kv();
    cache.store(slot, k + r * kvd, v + r * kvd, s.state->length(), rows);
    AttentionArgs aa{q + r * qd, rows, c.n_heads, c.n_kv_heads, hd, nullptr, nullptr, 0, kbeg + r, kend + r, scale,
                     att + r * qd};
    cache.bind(slot, aa);
    be.attention(aa);
    r += size_t(rows);
  }
  be.sigmoid_gate(att, gate, n * qd);
  be.matmul(att, N, w.mlp.wo, h);
}

void Qwen35Model::linear_layer(const HybridLayer& w, int slot, std::span<SequenceRows> batch, int N) const {
  const Backend& be = *backend_;
  const auto& L = cfg_.linear;
  const size_t n = size_t(N), C = size_t(L.channels()), nv = size_t(L.value_heads);
  const size_t vd = nv * size_t(L.value_dim);
  float* h = act_.h.floats(be, n * cfg_.hidden);
  float* m = act_.m.floats(be, n * C);
  float* cv = act_.c.floats(be, n * C);
  float* z = act_.z.floats(be, n * vd);
  float* b = act_.b.floats(be, n * nv);
  float* a = act_.a.floats(be, n * nv);
  float* y = act_.y.floats(be, n * vd);
  be.matmul_multi(h, N, {{&w.in_qkv, m}, {&w.in_z, z}, {&w.in_b, b}, {&w.in_a, a}});
  size_t r = 0;
  for (const SequenceRows& s : batch) {
    const int rows = s.rows.n;
    if (rows == 0) continue;
    auto& st = static_cast<HybridState&>(*s.state);
    const bool verify = s.rows.rollback_rows;
    // The rows a rollback left pending (hybrid_state.h) run first, quietly, in the same
    // recurrence call: their convolution goes in front of this forward's in one buffer, and
    // the conv state moves past them (where a verify leaves it: its first row).
    const int p = st.pending();
    const size_t all = size_t(p + rows);
    const float *bb = b + r * nv, *aa = a + r * nv;
    float* conv_out = cv + r * C;
    if (p > 0) {
      conv_out = act_.pc.floats(be, all * C);
      be.short_conv({st.log_inputs(slot), p, int(C), L.conv_kernel, w.conv.data(), st.conv(slot), conv_out});
      be.roll_conv_state(st.conv(slot), st.log_inputs(slot), p, int(C), L.conv_kernel, st.conv(slot));
      float* pb = act_.pb.floats(be, all * nv);
      float* pa = act_.pa.floats(be, all * nv);
      std::memcpy(pb, st.log_b(slot), sizeof(float) * nv * size_t(p));
      std::memcpy(pb + size_t(p) * nv, bb, sizeof(float) * nv * size_t(rows));
      std::memcpy(pa, st.log_a(slot), sizeof(float) * nv * size_t(p));
      std::memcpy(pa + size_t(p) * nv, aa, sizeof(float) * nv * size_t(rows));
      bb = pb;
      aa = pa;
    }
    if (verify) {  // the pending rows were read above; now the log holds this block
      std::memcpy(st.log_inputs(slot), m + r * C, sizeof(float) * C * size_t(rows));
      std::memcpy(st.log_b(slot), b + r * nv, sizeof(float) * nv * size_t(rows));
      std::memcpy(st.log_a(slot), a + r * nv, sizeof(float) * nv * size_t(rows));
    }
    // A verify leaves the states at its first row, so that rolling back into it costs
    // nothing; any other forward leaves them at its end.
    const float* in = m + r * C;
    be.short_conv({in, rows, int(C), L.conv_kernel, w.conv.data(), st.conv(slot), conv_out + size_t(p) * C});
    if (!verify) be.roll_conv_state(st.conv(slot), in, rows, int(C), L.conv_kernel, st.conv(slot));
    GatedDeltaArgs g{conv_out, bb, aa, z + r * vd, int(all), L.key_heads, L.value_heads, L.key_dim, L.value_dim,
                     w.neg_a.data(), w.dt_bias.data(), w.ssm_norm.data(), float(cfg_.rms_eps), st.rec(slot),
                     verify ? nullptr : st.rec(slot), y + r * vd};
    g.quiet = p;
    g.state_mid = verify ? st.rec(slot) : nullptr;
    be.gated_delta_net(g);
    r += size_t(rows);
  }
  be.matmul(y, N, w.out_proj, h);
}

void Qwen35Model::replay_linear(int li, const float* conv_old, const float* rec_old, const float* inputs,
                                const float* b, const float* a, int rows, float* conv_new, float* rec_new) const {
  const Backend& be = *backend_;
  const HybridLayer& w = layers_[size_t(linear_layer_ids_[size_t(li)])];
  const auto& L = cfg_.linear;
  const int C = L.channels();
  float* cv = replay_c_.floats(be, size_t(rows) * size_t(C));
  be.short_conv({inputs, rows, C, L.conv_kernel, w.conv.data(), conv_old, cv});
  be.roll_conv_state(conv_old, inputs, rows, C, L.conv_kernel, conv_new);
  be.gated_delta_net({cv, b, a, nullptr, rows, L.key_heads, L.value_heads, L.key_dim, L.value_dim, w.neg_a.data(),
                      w.dt_bias.data(), w.ssm_norm.data(), float(cfg_.rms_eps), rec_old, rec_new, nullptr});
}

void Qwen35Model::forward_batch(std::span<SequenceRows> batch) const {
  const ModelConfig& c = cfg_;
  const Backend& be = *backend_;
  const int H = c.hidden, half = c.rope_dims / 2;
  // Check every sequence before any state changes.
  const size_t N =
      check_batch(batch, c.vocab, [](const SequenceState* st) { return dynamic_cast<const HybridState*>(st) != nullptr; });
  if (N == 0) return;
  for (const SequenceRows& s : batch)
    if (s.rows.rollback_rows && s.rows.n > 0) static_cast<HybridState&>(*s.state).begin_log(s.rows.n);

  float* x = act_.x.floats(be, N * H);
  float* h = act_.h.floats(be, N * H);
  int* pos = act_.pos.ints(be, N);
  int* kbeg = act_.kbeg.ints(be, N);
  int* kend = act_.kend.ints(be, N);
  float* cosv = act_.cos.floats(be, N * half);
  float* sinv = act_.sin.floats(be, N * half);
  float* g = act_.ffn_g.floats(be, N * c.ffn);
  float* u = act_.ffn_u.floats(be, N * c.ffn);
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
  be.rope_tables(inv_freq_.data(), half, pos, int(N), 1.0f, cosv, sinv);

  const LayerDims d{H, c.n_heads, c.n_kv_heads, c.head_dim, c.ffn, float(c.rms_eps), true, false};
  for (int l = 0; l < c.n_layers; ++l) {
    const HybridLayer& w = layers_[size_t(l)];
    be.rmsnorm(x, int(N), H, w.mlp.attn_norm.data(), d.eps, h);
    if (w.kind == LayerKind::Attention) attention_layer(w, slot_[size_t(l)], batch, int(N));
    else linear_layer(w, slot_[size_t(l)], batch, int(N));
    be.add(x, h, N * H);
    mlp_residual(be, w.mlp, d, x, int(N), h, g, u);

    capture_layer(batch, l, x, H);
  }

  for (const SequenceRows& s : batch)
    if (s.rows.n > 0) static_cast<HybridState&>(*s.state).commit(s.rows.n, s.rows.rollback_rows);
  batch_logits(batch, x, H, c.vocab, [this](const float* hs, int rows, float* out) { logits_from_hidden(hs, rows, out); },
               logits_buf_);
}

}  // namespace dflash
