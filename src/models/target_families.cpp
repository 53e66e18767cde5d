// Which family a checkpoint belongs to. It sits above the family folders (it names each of
// them), so that the target model interface itself depends on none.
#include "models/dense/dense_model.h"
#include "models/target_model.h"

namespace dflash {

// One family so far: the dense decoders (Qwen3, Qwen2, Llama), whose loader reads both Hugging
// Face folders and GGUF files and names the supported architectures when a checkpoint is none
// of them. A new family adds its check here (by config.json's architectures / GGUF's
// general.architecture) before the dense fallback.
std::unique_ptr<TargetModel> TargetModel::load(const std::string& path, LoadOptions opt) {
  return DenseModel::load(path, std::move(opt));
}

}  // namespace dflash
