// Which family a checkpoint belongs to, and the default backend.
#include "models/target_model.h"

#include "models/dense/dense_model.h"

namespace dflash {

const std::shared_ptr<Backend>& backend_of(LoadOptions& opt) {
  if (!opt.backend) opt.backend = make_cpu_backend();
  return opt.backend;
}

// One family so far: the dense decoders (Qwen3, Qwen2, Llama), whose loader reads both Hugging
// Face folders and GGUF files and names the supported architectures when a checkpoint is none
// of them. A new family adds its check here (by config.json's architectures / GGUF's
// general.architecture) before the dense fallback.
std::unique_ptr<TargetModel> TargetModel::load(const std::string& path, LoadOptions opt) {
  return DenseModel::load(path, std::move(opt));
}

}  // namespace dflash
