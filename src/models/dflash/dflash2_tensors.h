#pragma once
// The tensors a DFlash2 draft has beyond the DFlash (v1) ones (dflash_tensors.h): a short
// convolution around each sublayer of each layer and the candidate selector. DFlash2 drafts
// are only read from Hugging Face folders, so these rows have no GGUF names.
#include <string>

#include "models/dflash/dflash2_draft.h"
#include "models/tensor_table.h"

namespace dflash {

enum class DFlash2Role : uint8_t {
  AttentionConvBase, AttentionConvProjection, MlpConvBase, MlpConvProjection,  // per layer
  SelectorProjection, PredecessorCodebook, SuccessorCodebook,
};

const TensorTable<DFlash2Role>& dflash2_tensors();
inline const TensorSpec<DFlash2Role>& dflash2_tensor(DFlash2Role r) { return find_tensor(dflash2_tensors(), r); }

// The v1 sizes plus the convolutions' and the selector's, and the target's vocabulary.
TensorDims dflash2_dims(const DraftConfig& c, const DFlash2Config& c2, int vocab);
// Whether a checkpoint name belongs to a DFlash2 part (a convolution or the selector): what
// tells a v1 checkpoint from a v2 one.
bool is_dflash2_tensor_name(const std::string& name);

}  // namespace dflash
