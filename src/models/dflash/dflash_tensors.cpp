#include "models/dflash/dflash_tensors.h"

#include "models/dense/dense_tensors.h"

namespace dflash {

const TensorTable<DFlashRole>& dflash_tensors() {
  using D = Dim;
  using R = DFlashRole;
  static const TensorTable<DFlashRole> table = {
      // role, scope, Hugging Face name, GGUF name, shape
      {R::Fc, Scope::Model, "fc.weight", "fc.weight", {D::Hidden, D::Features}},
      {R::HiddenNorm, Scope::Model, "hidden_norm.weight", "enc.output_norm.weight", {D::Hidden}},
      // The final norm has the target's names in both formats.
      {R::Norm, dense_tensor(DenseRole::FinalNorm)},
  };
  return table;
}

TensorDims dflash_dims(const DraftConfig& c) {
  return decoder_layer_dims(c.hidden, c.n_heads, c.n_kv_heads, c.head_dim, c.ffn)
      .set(Dim::Features, int64_t(c.target_layer_ids.size()) * c.hidden);
}

TensorConditions dflash_layer_conditions() { return TensorConditions{true, false, false}; }

std::string dflash_hf_prefix(const TensorStore& store) {
  const std::string fc = dflash_tensor(DFlashRole::Fc).hf;
  return store.find(fc) ? "" : store.find("model." + fc) ? "model." : "";
}

void read_dflash_weights(const Backend& be, const TensorSource& src, const TensorNaming& naming, const DraftConfig& c,
                         std::optional<WType> type, DFlashFields out) {
  const TensorDims dims = dflash_dims(c);
  out.fc = read_matrix(src, dflash_tensor(DFlashRole::Fc), naming, dims, type);
  be.prepare_weight(out.fc);
  out.hidden_norm = read_vector(src, dflash_tensor(DFlashRole::HiddenNorm), naming, dims);
  out.norm = read_vector(src, dflash_tensor(DFlashRole::Norm), naming, dims);
  for (int l = 0; l < c.n_layers; ++l)
    out.layers.push_back(read_layer(be, src, naming, l, dims, dflash_layer_conditions(), type));
}

}  // namespace dflash
