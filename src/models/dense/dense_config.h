#pragma once
// Reading a dense target's configuration (Qwen3, Qwen2, Llama).
#include <nlohmann/json.hpp>
#include <string>

#include "formats/gguf.h"
#include "models/model_config.h"

namespace dflash {

// config.json's fields (a multimodal checkpoint's text_config when it has one); throws
// dflash::Error naming `origin` for an unknown architecture or a missing or invalid key.
ModelConfig dense_config_from_json(const nlohmann::json& config, const std::string& origin);
// config.json of a folder, with generation_config.json's eos ids when present.
ModelConfig dense_config_from_folder(const std::string& dir);
// A GGUF file's <arch>.* metadata; vocab from token_embd's row count.
ModelConfig dense_config_from_gguf(const GgufFile& f);

}  // namespace dflash
