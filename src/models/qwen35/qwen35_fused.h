#pragma once
// Qwen3-Next's fused Gated DeltaNet input projections (../shared/qwen35-format.md §1.3).
// Qwen3-Next stores a linear layer's four input projections as two tensors whose rows are
// grouped per key head g = 0..nk-1, with r = nv / nk value heads per key head:
//   linear_attn.in_proj_qkvz.weight [2*nk*dk + 2*nv*dv, H]: [q_g (dk) | k_g (dk) | v_g (r*dv) | z_g (r*dv)]
//   linear_attn.in_proj_ba.weight   [2*nv, H]:               [b_g (r) | a_g (r)]
// Qwen3.5 stores them apart (in_proj_qkv: all q heads | all k heads | all v heads; in_proj_z,
// in_proj_b, in_proj_a), with value head g*r + j in both. The loader splits the fused rows into
// the Qwen3.5 matrices, so the forward (and the GGUF writer) see one layout.
#include <cstdint>
#include <optional>

#include "kernels/weight_matrix.h"
#include "models/tensor_table.h"

namespace dflash {

struct HybridLayer;

enum class LinearProjections : uint8_t { Separate, Fused };

// Which form layer `layer` of a Hugging Face checkpoint stores (GGUF files: Separate). Throws,
// naming the tensors, when only one of the fused pair is there, when a fused tensor sits beside
// a separate one, or when neither form's first tensor is there.
LinearProjections linear_projections(const TensorSource& src, const TensorNaming& naming, int layer);

// Reads the fused pair of layer `layer` (shapes checked against dims) and fills w.in_qkv, in_z,
// in_b and in_a with their rows in the separate tensors' order, as `type` (nullopt: the stored
// dtype). Rows are copied as bytes when the type stays, else decoded to fp32 and encoded as the
// separate tensors' loader does, so both forms of the same weights give the same matrices.
void read_fused_projections(const TensorSource& src, const TensorNaming& naming, int layer, const TensorDims& dims,
                            std::optional<WType> type, HybridLayer& w);

}  // namespace dflash
