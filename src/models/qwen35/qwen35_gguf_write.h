#pragma once
// A Qwen3.5 hybrid Hugging Face folder (multimodal, text-only or MLX form) -> one GGUF file of
// llama.cpp's architecture qwen35, written as llama.cpp's converter writes it
// (../shared/qwen35-format.md §2.5), with the folder's tokenizer.
#include <string>

#include "kernels/weight_matrix.h"

namespace dflash {

// type: f32, f16, bf16, q8_0 or q4_0 for the matrices; vectors, the conv and ssm_a are f32.
void convert_qwen35_to_gguf(const std::string& hf_dir, const std::string& out_path, WType type);

}  // namespace dflash
