#pragma once
// The tensors of a DFlash (v1) draft, shared by the DFlash2 draft: fc over the tapped target
// features, hidden_norm, the final norm, and Qwen3 decoder layers (the dense table's
// per-layer rows with q/k norms and no biases). Hugging Face folders name them as z-lab does
// (optionally under "model."), llama.cpp's `dflash` GGUF under its own names.
#include <optional>
#include <string>
#include <vector>

#include "formats/safetensors.h"
#include "models/dflash/dflash_draft.h"
#include "models/tensor_table.h"

namespace dflash {

enum class DFlashRole : uint8_t { Fc, HiddenNorm, Norm };

const TensorTable<DFlashRole>& dflash_tensors();
inline const TensorSpec<DFlashRole>& dflash_tensor(DFlashRole r) { return find_tensor(dflash_tensors(), r); }

// The decoder layer's sizes plus Features (the tapped layers side by side).
TensorDims dflash_dims(const DraftConfig& c);
// The layers' conditions: Qwen3 (q/k norms, no biases).
TensorConditions dflash_layer_conditions();
// A folder's name prefix: "model." when its fc lives there, else "".
std::string dflash_hf_prefix(const TensorStore& store);

// Where a draft's weights go: the DFlashDraft's own fields (filled by its own members).
struct DFlashFields {
  WeightMatrix& fc;  // prepared for the backend's kernels
  std::vector<float>& hidden_norm;
  std::vector<float>& norm;
  std::vector<LayerWeights>& layers;
};
void read_dflash_weights(const Backend& be, const TensorSource& src, const TensorNaming& naming, const DraftConfig& c,
                         std::optional<WType> type, DFlashFields out);

}  // namespace dflash
