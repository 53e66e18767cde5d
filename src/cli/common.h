#pragma once
// Pieces the subcommands share: finding the model, parsing id lists, loading a model pair.
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "kernels/weight_matrix.h"
#include "models/transformer.h"
#include "tokenizer/tokenizer.h"

namespace CLI {
class App;
}

namespace dflash {
class DFlashDraft;
}

namespace dflash::cli {

// --cache-type (the target's KV cache) and --cache-type-draft: f32 | f16 | q8 | q4. The draft
// stays f32 by default: a quantized draft cache is known to collapse acceptance elsewhere.
struct CacheTypes {
  std::string target = "f32", draft = "f32";
};
void add_cache_type_options(CLI::App* sub, CacheTypes& c);
// Throws dflash::Error for an unknown name or a head_dim the format cannot take.
void apply_cache_types(const CacheTypes& c, Transformer& model, DFlashDraft* draft);

// --simd-target NAME: holds Highway's dispatch to one SIMD target this CPU runs (Highway's name:
// AVX3, AVX2, SSE4, EMU128, ...), so that tests can record and compare what each target
// computes; empty keeps the best. hold_simd_target throws dflash::Error for a target the CPU lacks.
void add_simd_target_option(CLI::App* sub, std::string& target);
void hold_simd_target(const std::string& name);

// --model when given, else the shipped demo target (models/demo/target).
std::string resolve_model_dir(const std::string& given);
std::vector<int32_t> parse_id_list(const std::string& s);
// "native" keeps the checkpoint's dtype; else f32|f16|bf16|q8|q4.
std::optional<WType> parse_weights_option(const std::string& s);
std::unique_ptr<Tokenizer> load_tokenizer_if_present(const std::string& dir);
// The model's end-of-sequence ids: generation_config / config eos plus the tokenizer's eos.
std::vector<int32_t> stop_ids_for(const ModelConfig& cfg, const Tokenizer* tok);
// A single user turn in the model's chat format (Qwen3-style <|im_start|> turns).
std::string simple_chat_prompt(const std::string& user, bool enable_thinking);

}  // namespace dflash::cli
