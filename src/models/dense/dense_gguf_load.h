#pragma once
// Dense targets (qwen3, qwen2, llama) from llama.cpp GGUF files.
#include <memory>
#include <string>

#include "formats/gguf.h"
#include "models/model_config.h"
#include "models/dense/dense_model.h"

namespace dflash {

std::unique_ptr<DenseModel> load_dense_gguf(const std::string& path, LoadOptions& opt);


}  // namespace dflash
