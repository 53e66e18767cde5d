#include "models/tensor_table.h"

#include "models/gguf_weights.h"

namespace dflash {

bool present(const TensorInfo& t, const TensorConditions& c) {
  switch (t.when) {
    case When::Always: return true;
    case When::WithQkNorm: return c.qk_norm;
    case When::WithBias: return c.bias;
    case When::Untied: return !c.tied;
    case When::IfStored: return true;
    case When::AttentionLayer: return !c.linear_layer;
    case When::LinearLayer: return c.linear_layer;
  }
  return true;
}

std::string tensor_name(const TensorInfo& t, const TensorNaming& naming, int layer) {
  if (naming.format == TensorFormat::Gguf)
    return t.scope == Scope::PerLayer ? "blk." + std::to_string(layer) + "." + t.gguf : std::string(t.gguf);
  if (t.special == Special::BesideTextModel) return t.hf;
  return t.scope == Scope::PerLayer ? naming.prefix + "layers." + std::to_string(layer) + "." + t.hf
                                    : naming.prefix + t.hf;
}

std::vector<int64_t> tensor_shape(const TensorInfo& t, const TensorDims& dims) {
  std::vector<int64_t> s;
  for (int i = 0; i < t.shape.rank; ++i) s.push_back(dims[t.shape.dims[size_t(i)]]);
  return s;
}

namespace {

int64_t qk_head_dim_of(const TensorInfo& t, const TensorNaming& naming) {
  return t.special == Special::LlamaQkRows ? naming.llama_qk_head_dim : 0;
}

}  // namespace

WeightMatrix read_matrix(const TensorSource& src, const TensorInfo& t, const TensorNaming& naming,
                         const TensorDims& dims, std::optional<WType> type, int layer) {
  const std::vector<int64_t> s = tensor_shape(t, dims);
  return src.matrix(tensor_name(t, naming, layer), s[0], s[1], t.special == Special::Gathered ? std::nullopt : type,
                    qk_head_dim_of(t, naming));
}

std::vector<float> read_vector(const TensorSource& src, const TensorInfo& t, const TensorNaming& naming,
                               const TensorDims& dims, int layer) {
  std::vector<float> v = src.vector(tensor_name(t, naming, layer), tensor_shape(t, dims)[0]);
  if (const int64_t hd = qk_head_dim_of(t, naming)) {  // biases follow their rows
    std::vector<float> o(v.size());
    for (size_t r = 0; r < v.size(); ++r) o[r] = v[size_t(llama_qk_gguf_row(int64_t(r), hd))];
    v = std::move(o);
  }
  return v;
}

}  // namespace dflash
