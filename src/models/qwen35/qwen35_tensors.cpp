#include "models/qwen35/qwen35_tensors.h"

#include <cmath>

#include "models/qwen35/qwen35_fused.h"
#include "models/weight_loader.h"
#include "util/error.h"

namespace dflash {

const TensorTable<Qwen35Role>& qwen35_tensors() {
  using D = Dim;
  using R = Qwen35Role;
  constexpr Scope M = Scope::Model, L = Scope::PerLayer;
  constexpr When always = When::Always, att = When::AttentionLayer, lin = When::LinearLayer;
  static const TensorTable<Qwen35Role> table = {
      // role, scope, Hugging Face name, GGUF name, shape, when, special
      {R::Embed, M, "embed_tokens.weight", "token_embd.weight", {D::Vocab, D::Hidden}, always, Special::Gathered},
      {R::InNorm, L, "input_layernorm.weight", "attn_norm.weight", {D::Hidden}},
      {R::Wq, L, "self_attn.q_proj.weight", "attn_q.weight", {D::QGateDim, D::Hidden}, att},
      {R::Wk, L, "self_attn.k_proj.weight", "attn_k.weight", {D::KvDim, D::Hidden}, att},
      {R::Wv, L, "self_attn.v_proj.weight", "attn_v.weight", {D::KvDim, D::Hidden}, att},
      {R::QNorm, L, "self_attn.q_norm.weight", "attn_q_norm.weight", {D::HeadDim}, att},
      {R::KNorm, L, "self_attn.k_norm.weight", "attn_k_norm.weight", {D::HeadDim}, att},
      {R::Wo, L, "self_attn.o_proj.weight", "attn_output.weight", {D::Hidden, D::QDim}, att},
      {R::InQkv, L, "linear_attn.in_proj_qkv.weight", "attn_qkv.weight", {D::LinChannels, D::Hidden}, lin},
      {R::InZ, L, "linear_attn.in_proj_z.weight", "attn_gate.weight", {D::LinValueDim, D::Hidden}, lin},
      {R::InB, L, "linear_attn.in_proj_b.weight", "ssm_beta.weight", {D::LinValueHeads, D::Hidden}, lin},
      {R::InA, L, "linear_attn.in_proj_a.weight", "ssm_alpha.weight", {D::LinValueHeads, D::Hidden}, lin},
      {R::Conv, L, "linear_attn.conv1d.weight", "ssm_conv1d.weight", {D::LinChannels, D::One, D::ConvKernel}, lin},
      {R::ALog, L, "linear_attn.A_log", "ssm_a", {D::LinValueHeads}, lin},
      {R::DtBias, L, "linear_attn.dt_bias", "ssm_dt.bias", {D::LinValueHeads}, lin},
      {R::SsmNorm, L, "linear_attn.norm.weight", "ssm_norm.weight", {D::LinHeadDim}, lin},
      {R::OutProj, L, "linear_attn.out_proj.weight", "ssm_out.weight", {D::Hidden, D::LinValueDim}, lin},
      {R::PostNorm, L, "post_attention_layernorm.weight", "post_attention_norm.weight", {D::Hidden}},
      {R::Gate, L, "mlp.gate_proj.weight", "ffn_gate.weight", {D::Ffn, D::Hidden}},
      {R::Up, L, "mlp.up_proj.weight", "ffn_up.weight", {D::Ffn, D::Hidden}},
      {R::Down, L, "mlp.down_proj.weight", "ffn_down.weight", {D::Hidden, D::Ffn}},
      {R::FinalNorm, M, "norm.weight", "output_norm.weight", {D::Hidden}},
      {R::LmHead, M, "lm_head.weight", "output.weight", {D::Vocab, D::Hidden}, When::Untied, Special::BesideTextModel},
  };
  return table;
}

TensorDims qwen35_dims(const ModelConfig& c) {
  const auto& L = c.linear;
  TensorDims d;
  d.set(Dim::Hidden, c.hidden)
      .set(Dim::QDim, int64_t(c.n_heads) * c.head_dim)
      .set(Dim::QGateDim, 2 * int64_t(c.n_heads) * c.head_dim)
      .set(Dim::KvDim, int64_t(c.n_kv_heads) * c.head_dim)
      .set(Dim::HeadDim, c.head_dim)
      .set(Dim::Ffn, c.ffn)
      .set(Dim::Vocab, c.vocab)
      .set(Dim::One, 1)
      .set(Dim::ConvKernel, L.conv_kernel)
      .set(Dim::LinChannels, L.channels())
      .set(Dim::LinValueDim, int64_t(L.value_heads) * L.value_dim)
      .set(Dim::LinValueHeads, L.value_heads)
      .set(Dim::LinHeadDim, L.value_dim)
      .set(Dim::LinKeyHeads, L.key_heads);
  return d;
}

std::vector<float> centered_norm(std::vector<float> w, const Qwen35Storage& storage) {
  if (!storage.norms_plus_one)
    for (float& x : w) x = 1.0f + x;
  return w;
}

void reorder_layer_v_heads(HybridLayer& w, int key_heads, const TensorDims& dims, VHeadOrder to,
                           std::optional<WType> type) {
  if (w.kind != LayerKind::LinearAttention) return;
  const int nv = int(dims[Dim::LinValueHeads]);
  const int64_t dv = dims[Dim::LinHeadDim], C = dims[Dim::LinChannels];
  const VHeadSpan heads{0, dv, key_heads, nv}, scalars{0, 1, key_heads, nv}, qkv_v{C - nv * dv, dv, key_heads, nv};
  auto rows = [&](WeightMatrix& m, const VHeadSpan& s) { m = reorder_v_rows(m, s, to, type.value_or(m.type)); };
  rows(w.in_qkv, qkv_v);  // q and k rows are per key head and stay
  rows(w.in_z, heads);
  rows(w.in_b, scalars);
  rows(w.in_a, scalars);
  w.out_proj = reorder_v_columns(w.out_proj, heads, to, type.value_or(w.out_proj.type));
  w.conv = reorder_v_heads(w.conv, qkv_v, to, dims[Dim::ConvKernel]);  // [channels][kernel]: a channel's taps move together
  w.neg_a = reorder_v_heads(w.neg_a, scalars, to);
  w.dt_bias = reorder_v_heads(w.dt_bias, scalars, to);
}

HybridLayer read_hybrid_layer(const Backend& be, const TensorSource& src, const TensorNaming& naming, int layer,
                              LayerKind kind, const TensorDims& dims, const Qwen35Storage& storage,
                              std::optional<WType> type) {
  using R = Qwen35Role;
  HybridLayer w;
  w.kind = kind;
  TensorConditions when;
  when.linear_layer = kind == LayerKind::LinearAttention;
  // Qwen3-Next's fused pair stands in for in_proj_qkv/z/b/a (qwen35_fused.h).
  const bool fused = when.linear_layer && linear_projections(src, naming, layer) == LinearProjections::Fused;
  if (fused) read_fused_projections(src, naming, layer, dims, type, w);
  for (const auto& t : qwen35_tensors()) {
    if (t.scope != Scope::PerLayer || !present(t, when)) continue;
    if (fused && (t.role == R::InQkv || t.role == R::InZ || t.role == R::InB || t.role == R::InA)) continue;
    auto mat = [&] { return read_matrix(src, t, naming, dims, type, layer); };
    auto vec = [&] { return read_vector(src, t, naming, dims, layer); };
    switch (t.role) {
      case R::InNorm: w.mlp.attn_norm = centered_norm(vec(), storage); break;
      case R::PostNorm: w.mlp.ffn_norm = centered_norm(vec(), storage); break;
      case R::QNorm: w.mlp.q_norm = centered_norm(vec(), storage); break;
      case R::KNorm: w.mlp.k_norm = centered_norm(vec(), storage); break;
      case R::Wq: w.mlp.wq = mat(); break;
      case R::Wk: w.mlp.wk = mat(); break;
      case R::Wv: w.mlp.wv = mat(); break;
      case R::Wo: w.mlp.wo = mat(); break;
      case R::Gate: w.mlp.gate = mat(); break;
      case R::Up: w.mlp.up = mat(); break;
      case R::Down: w.mlp.down = mat(); break;
      case R::InQkv: w.in_qkv = mat(); break;
      case R::InZ: w.in_z = mat(); break;
      case R::InB: w.in_b = mat(); break;
      case R::InA: w.in_a = mat(); break;
      case R::OutProj: w.out_proj = mat(); break;
      case R::DtBias: w.dt_bias = vec(); break;
      case R::SsmNorm: w.ssm_norm = vec(); break;
      case R::ALog: {
        w.neg_a = vec();
        if (!storage.stores_neg_a)
          for (float& x : w.neg_a) x = -std::exp(x);
        break;
      }
      case R::Conv: {
        // [channels][1][kernel] in Hugging Face folders ([channels][kernel][1] in MLX ones,
        // the same values in the same order); GGUF squeezes it to [channels][kernel].
        const int64_t C = dims[Dim::LinChannels], K = dims[Dim::ConvKernel];
        if (naming.format == TensorFormat::Gguf) {
          WeightMatrix m = src.matrix(tensor_name(t, naming, layer), C, K, WType::F32, 0);
          const float* p = reinterpret_cast<const float*>(m.data);
          w.conv.assign(p, p + C * K);
        } else {
          const auto& L = dynamic_cast<const WeightLoader&>(src);
          const std::string name = tensor_name(t, naming, layer);
          const TensorView* v = L.try_get(name);
          const bool mlx = v && v->shape == std::vector<int64_t>{C, K, 1};
          w.conv = L.values(name, mlx ? std::vector<int64_t>{C, K, 1} : tensor_shape(t, dims));
        }
        break;
      }
      default: break;
    }
  }
  if (storage.tiled_key_heads > 0) reorder_layer_v_heads(w, storage.tiled_key_heads, dims, VHeadOrder::Grouped);
  for (WeightMatrix* m : {&w.mlp.wq, &w.mlp.wk, &w.mlp.wv, &w.mlp.wo, &w.mlp.gate, &w.mlp.up, &w.mlp.down, &w.in_qkv,
                          &w.in_z, &w.in_b, &w.in_a, &w.out_proj})
    if (m->rows > 0) be.prepare_weight(*m);
  return w;
}

}  // namespace dflash
