// Which family a checkpoint belongs to. It sits above the family folders (it names each of
// them), so that the target model interface itself depends on none.
#include "formats/gguf.h"
#include "formats/json_file.h"
#include "models/dense/dense_model.h"
#include "models/qwen35/qwen35_config.h"
#include "models/qwen35/qwen35_model.h"
#include "models/target_model.h"
#include "util/mapped_file.h"

namespace dflash {

// The Qwen3.5 hybrids and dense Qwen3-Next (same forward, ../shared/qwen35-format.md §1.3) by
// config.json (architectures / model_type, is_qwen35_config) or GGUF general.architecture
// "qwen35"; everything else goes to the dense decoders, whose loader
// reads both formats and names the supported architectures when a checkpoint is none of them.
std::unique_ptr<TargetModel> TargetModel::load(const std::string& path, LoadOptions opt) {
  if (has_gguf_suffix(path)) {
    // Opening the file twice costs a mapping, not a read; a malformed file fails here with the
    // reader's own message, as it would in the dense loader.
    if (GgufFile(path).get_string("general.architecture") == "qwen35") return Qwen35Model::load(path, std::move(opt));
    return DenseModel::load(path, std::move(opt));
  }
  if (file_exists(path + "/config.json") && is_qwen35_config(read_json_file(path + "/config.json")))
    return Qwen35Model::load(path, std::move(opt));
  return DenseModel::load(path, std::move(opt));
}

}  // namespace dflash
