#pragma once
// Finding a model and what comes with its weights (tokenizer, end-of-sequence ids): shared by
// the commands and the benchmarks, which load models the same way.
#include <cstdint>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "kernels/weight_matrix.h"
#include "models/model_config.h"
#include "tokenizer/tokenizer.h"

namespace dflash {

// The given model path when not empty, else the shipped demo target (models/demo35/target, the
// Qwen3.5 hybrid, else models/demo/target;
// looked for from the current folder and beside the executable).
std::string resolve_model_dir(const std::string& given);
// A shipped model folder (e.g. "models/demo/target"), looked for as resolve_model_dir looks;
// `rel` itself when none is found (the error then names it).
std::string shipped_path(const std::string& rel);
// The shipped demo draft beside a demo target folder (draft2, else draft); "" when none.
std::string demo_draft_beside(const std::string& target_dir);
// A --weights value as LoadOptions::weights: "native" keeps the checkpoint's dtype (nullopt);
// else f32|f16|bf16|q8|q4.
std::optional<WType> parse_weights_option(const std::string& s);
// The tokenizer of a model folder (tokenizer.json) or GGUF file (tokenizer.ggml.*); null when
// it has none.
std::unique_ptr<Tokenizer> load_tokenizer_if_present(const std::string& dir);
// The model's end-of-sequence ids: generation_config / config eos plus the tokenizer's eos.
std::vector<int32_t> stop_ids_for(const ModelConfig& cfg, const Tokenizer* tok);

}  // namespace dflash
