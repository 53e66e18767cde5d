#pragma once
// A model as one GGUF file that llama.cpp loads: from a Hugging Face folder (`dflash convert`)
// or from any source of weights by name (the llama.cpp comparison bench writes random ones).
#include <functional>
#include <string>
#include <vector>

#include "kernels/weight_matrix.h"
#include "models/model_config.h"

namespace dflash {

// Where write_gguf takes the weights from, by Hugging Face name without the model prefix
// ("layers.0.self_attn.q_proj.weight", "embed_tokens.weight", "lm_head.weight").
struct GgufTensorSource {
  std::function<WeightMatrix(const std::string& name, int64_t rows, int64_t cols, WType type)> matrix;
  std::function<std::vector<float>(const std::string& name, int64_t n)> vector;
};

// Writes config + weights + the tokenizer of tokenizer_dir (tokenizer.json, padded with
// unused [PAD] tokens up to the vocabulary) as GGUF. type: bf16, q8_0, q4_0, f32 or f16.
void write_gguf(const ModelConfig& cfg, const GgufTensorSource& src, const std::string& tokenizer_dir,
                const std::string& name, const std::string& out_path, WType type);
// write_gguf of a Hugging Face folder (config.json, safetensors, tokenizer.json), named after
// the folder.
void convert_to_gguf(const std::string& hf_dir, const std::string& out_path, WType type);

}  // namespace dflash
