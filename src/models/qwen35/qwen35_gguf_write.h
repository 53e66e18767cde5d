#pragma once
// A Qwen3.5 hybrid Hugging Face folder (multimodal, text-only or MLX form) -> one GGUF file of
// llama.cpp's architecture qwen35, written as llama.cpp's converter writes it
// (../shared/qwen35-format.md §2.5), with the folder's tokenizer.
#include <nlohmann/json.hpp>
#include <string>

#include "kernels/weight_matrix.h"
#include "models/model_config.h"
#include "models/qwen35/qwen35_tensors.h"
#include "models/tensor_source.h"

namespace dflash {

// type: f32, f16, bf16, q8_0 or q4_0 for the matrices; vectors, the conv and ssm_a are f32.
void convert_qwen35_to_gguf(const std::string& hf_dir, const std::string& out_path, WType type);

// The same from any tensor source named by `naming` (a folder, or the random weights of the
// llama.cpp comparison bench), with `tc` the text config's JSON (layer_types,
// full_attention_interval; may be empty), the untied head's name in the source, and the
// tokenizer of tokenizer_dir (padded with [PAD] tokens up to the vocabulary).
void write_qwen35_gguf(const ModelConfig& c, const nlohmann::json& tc, const TensorSource& src,
                       const TensorNaming& naming, const Qwen35Storage& storage, const std::string& head_name,
                       const std::string& tokenizer_dir, const std::string& name, const std::string& out_path,
                       WType type);

}  // namespace dflash
