#pragma once
// The Qwen3.5 / Qwen3.6 hybrid family's config reader (../shared/qwen35-format.md §1): the
// multimodal form (Qwen3_5ForConditionalGeneration, text keys under text_config) and the
// text-only form (Qwen3_5ForCausalLM), and Qwen3-Next's flat dense form (Qwen3NextForCausalLM,
// model_type qwen3_next, §1.3; mixture-of-experts configs are refused), into a ModelConfig
// with its linear-attention shape.
#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "models/model_config.h"

namespace dflash {

// Whether a config.json names a Qwen3.5 hybrid or Qwen3-Next (by architectures or model_type).
bool is_qwen35_config(const nlohmann::json& root);

ModelConfig qwen35_config_from_json(const nlohmann::json& root, const std::string& origin);
// config.json, with generation_config.json's eos ids when present.
ModelConfig qwen35_config_from_folder(const std::string& dir);

class GgufFile;
// A llama.cpp GGUF file of architecture qwen35 (general.architecture "qwen35").
ModelConfig qwen35_config_from_gguf(const GgufFile& f);

// RoPE inverse frequencies of the rotated dims, computed in fp32 as the format says
// (1 / theta^(2i/R), i < R/2), held as doubles for the backend's table op.
std::vector<double> qwen35_inv_freq(const ModelConfig& c);

}  // namespace dflash
