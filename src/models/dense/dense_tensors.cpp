#include "models/dense/dense_tensors.h"

#include "models/dense/arch_spec.h"
#include "models/weight_loader.h"

namespace dflash {

const TensorTable<DenseRole>& dense_tensors() {
  using D = Dim;
  using R = DenseRole;
  constexpr Scope M = Scope::Model, L = Scope::PerLayer;
  constexpr When always = When::Always;
  // llama.cpp's order: the GGUF writer emits the tensors in exactly this order.
  static const TensorTable<DenseRole> table = {
      // role, scope, Hugging Face name, GGUF name, shape, when, special
      {R::Embed, M, "embed_tokens.weight", "token_embd.weight", {D::Vocab, D::Hidden}, always, Special::Gathered},
      // llama3 RoPE scaling as per-pair frequency divisors; in Hugging Face folders it is config.
      {R::RopeFreqs, M, nullptr, "rope_freqs.weight", {D::HalfHeadDim}, When::IfStored},
      {R::AttnNorm, L, "input_layernorm.weight", "attn_norm.weight", {D::Hidden}},
      {R::Wq, L, "self_attn.q_proj.weight", "attn_q.weight", {D::QDim, D::Hidden}, always, Special::LlamaQkRows},
      {R::Wk, L, "self_attn.k_proj.weight", "attn_k.weight", {D::KvDim, D::Hidden}, always, Special::LlamaQkRows},
      {R::Wv, L, "self_attn.v_proj.weight", "attn_v.weight", {D::KvDim, D::Hidden}},
      {R::Bq, L, "self_attn.q_proj.bias", "attn_q.bias", {D::QDim}, When::WithBias, Special::LlamaQkRows},
      {R::Bk, L, "self_attn.k_proj.bias", "attn_k.bias", {D::KvDim}, When::WithBias, Special::LlamaQkRows},
      {R::Bv, L, "self_attn.v_proj.bias", "attn_v.bias", {D::KvDim}, When::WithBias},
      {R::QNorm, L, "self_attn.q_norm.weight", "attn_q_norm.weight", {D::HeadDim}, When::WithQkNorm},
      {R::KNorm, L, "self_attn.k_norm.weight", "attn_k_norm.weight", {D::HeadDim}, When::WithQkNorm},
      {R::Wo, L, "self_attn.o_proj.weight", "attn_output.weight", {D::Hidden, D::QDim}},
      {R::FfnNorm, L, "post_attention_layernorm.weight", "ffn_norm.weight", {D::Hidden}},
      {R::Gate, L, "mlp.gate_proj.weight", "ffn_gate.weight", {D::Ffn, D::Hidden}},
      {R::Up, L, "mlp.up_proj.weight", "ffn_up.weight", {D::Ffn, D::Hidden}},
      {R::Down, L, "mlp.down_proj.weight", "ffn_down.weight", {D::Hidden, D::Ffn}},
      {R::FinalNorm, M, "norm.weight", "output_norm.weight", {D::Hidden}},
      {R::LmHead, M, "lm_head.weight", "output.weight", {D::Vocab, D::Hidden}, When::Untied, Special::BesideTextModel},
  };
  return table;
}

TensorDims decoder_layer_dims(int64_t hidden, int n_heads, int n_kv_heads, int head_dim, int64_t ffn) {
  TensorDims d;
  d.set(Dim::Hidden, hidden)
      .set(Dim::QDim, int64_t(n_heads) * head_dim)
      .set(Dim::KvDim, int64_t(n_kv_heads) * head_dim)
      .set(Dim::HeadDim, head_dim)
      .set(Dim::HalfHeadDim, head_dim / 2)
      .set(Dim::Ffn, ffn);
  return d;
}

TensorDims dense_dims(const ModelConfig& c) {
  return decoder_layer_dims(c.hidden, c.n_heads, c.n_kv_heads, c.head_dim, c.ffn).set(Dim::Vocab, c.vocab);
}

TensorConditions dense_conditions(const ModelConfig& c) {
  return TensorConditions{c.arch->qk_norm, c.qkv_bias, c.tie_embeddings};
}

TensorNaming dense_gguf_naming(const ModelConfig& c) {
  return gguf_tensor_naming(c.arch->model_type == "llama" ? c.head_dim : 0);
}

namespace {

// The LayerWeights field a per-layer role fills: a matrix, or else a vector.
WeightMatrix* matrix_field(LayerWeights& w, DenseRole r) {
  switch (r) {
    case DenseRole::Wq: return &w.wq;
    case DenseRole::Wk: return &w.wk;
    case DenseRole::Wv: return &w.wv;
    case DenseRole::Wo: return &w.wo;
    case DenseRole::Gate: return &w.gate;
    case DenseRole::Up: return &w.up;
    case DenseRole::Down: return &w.down;
    default: return nullptr;
  }
}

std::vector<float>& vector_field(LayerWeights& w, DenseRole r) {
  switch (r) {
    case DenseRole::AttnNorm: return w.attn_norm;
    case DenseRole::FfnNorm: return w.ffn_norm;
    case DenseRole::QNorm: return w.q_norm;
    case DenseRole::KNorm: return w.k_norm;
    case DenseRole::Bq: return w.bq;
    case DenseRole::Bk: return w.bk;
    case DenseRole::Bv: return w.bv;
    default: throw std::logic_error("dense tensor table: a per-layer role without a LayerWeights field");
  }
}

}  // namespace

LayerWeights read_layer(const Backend& be, const TensorSource& src, const TensorNaming& naming, int layer, const TensorDims& dims,
                        const TensorConditions& when, std::optional<WType> type) {
  LayerWeights w;
  for (const auto& t : dense_tensors()) {
    if (t.scope != Scope::PerLayer || !present(t, when)) continue;
    if (WeightMatrix* m = matrix_field(w, t.role))
      *m = read_matrix(src, t, naming, dims, type, layer);
    else
      vector_field(w, t.role) = read_vector(src, t, naming, dims, layer);
  }
  prepare_layer(be, w);
  return w;
}

void read_dense_body(const Backend& be, const TensorSource& src, const TensorNaming& naming, const ModelConfig& c,
                     std::optional<WType> type, DenseFields out) {
  const TensorDims dims = dense_dims(c);
  const TensorConditions when = dense_conditions(c);
  // Gathered: only rows are looked up, so it stays as stored.
  out.embed = read_matrix(src, dense_tensor(DenseRole::Embed), naming, dims, type);
  for (int l = 0; l < c.n_layers; ++l) out.layers.push_back(read_layer(be, src, naming, l, dims, when, type));
  out.final_norm = read_vector(src, dense_tensor(DenseRole::FinalNorm), naming, dims);
}

WeightMatrix read_embedding_as_head(const TensorSource& src, const TensorNaming& naming, const ModelConfig& c,
                                    std::optional<WType> type) {
  const TensorSpec<DenseRole>& t = dense_tensor(DenseRole::Embed);
  const std::vector<int64_t> s = tensor_shape(t, dense_dims(c));
  return src.matrix(tensor_name(t, naming), s[0], s[1], type, 0);
}

std::string find_hf_lm_head(const WeightLoader& L, const std::string& p) {
  const std::string head = dense_tensor(DenseRole::LmHead).hf;
  const std::string beside = p.size() >= 6 && p.compare(p.size() - 6, 6, "model.") == 0 ? p.substr(0, p.size() - 6) : "";
  for (const std::string& name : {beside + head, head})
    if (L.try_get(name)) return name;
  return "";
}

Error missing_lm_head(const std::string& dir) {
  return file_error(dir, "missing tensor '" + std::string(dense_tensor(DenseRole::LmHead).hf) +
                             "' (and tie_word_embeddings is false)");
}

}  // namespace dflash
