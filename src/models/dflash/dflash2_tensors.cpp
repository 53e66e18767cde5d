#include "models/dflash/dflash2_tensors.h"

#include "models/dflash/dflash_tensors.h"

namespace dflash {

const TensorTable<DFlash2Role>& dflash2_tensors() {
  using D = Dim;
  using R = DFlash2Role;
  constexpr Scope M = Scope::Model, L = Scope::PerLayer;
  // No GGUF names: llama.cpp's format has no DFlash2 draft.
  static const TensorTable<DFlash2Role> table = {
      // role, scope, Hugging Face name, GGUF name, shape, when, special
      // base_kernel is read whole as fp32 (a few values); the projections are streamed.
      {R::AttentionConvBase, L, "attention_conv.base_kernel", nullptr, {D::ConvSides, D::ConvKernel, D::Hidden}},
      {R::AttentionConvProjection, L, "attention_conv.kernel_projection.weight", nullptr, {D::ConvRows, D::Hidden}},
      {R::MlpConvBase, L, "mlp_conv.base_kernel", nullptr, {D::ConvSides, D::ConvKernel, D::Hidden}},
      {R::MlpConvProjection, L, "mlp_conv.kernel_projection.weight", nullptr, {D::ConvRows, D::Hidden}},
      {R::SelectorProjection, M, "candidate_selector.hidden_projection.weight", nullptr, {D::SelectorRank, D::Hidden}},
      // Only a few rows are read per block: they stay in the mapped file, in its own dtype.
      {R::PredecessorCodebook, M, "candidate_selector.predecessor_codebook", nullptr, {D::Vocab, D::SelectorRank},
       When::Always, Special::Gathered},
      {R::SuccessorCodebook, M, "candidate_selector.successor_codebook", nullptr, {D::Vocab, D::SelectorRank},
       When::Always, Special::Gathered},
  };
  return table;
}

TensorDims dflash2_dims(const DraftConfig& c, const DFlash2Config& c2, int vocab) {
  const int64_t K = c2.conv_kernel, G = c.hidden / c2.conv_group;
  return dflash_dims(c)
      .set(Dim::ConvSides, 2)
      .set(Dim::ConvKernel, K)
      .set(Dim::ConvRows, 2 * K * G)
      .set(Dim::SelectorRank, c2.selector_rank)
      .set(Dim::Vocab, vocab);
}

bool is_dflash2_tensor_name(const std::string& name) {
  // The parts are the names' first components: attention_conv., mlp_conv., candidate_selector.
  for (const auto& t : dflash2_tensors()) {
    const std::string hf = t.hf;
    if (name.find(hf.substr(0, hf.find('.') + 1)) != std::string::npos) return true;
  }
  return false;
}

}  // namespace dflash
