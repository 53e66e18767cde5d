#pragma once
// Option handling the subcommands share: KV cache types, token id lists. (Finding a model and
// its tokenizer is models/model_files.h, which the benchmarks use too.)
#include <cstdint>
#include <string>
#include <vector>

#include "models/model_pair.h"

namespace CLI {
class App;
}

namespace dflash::cli {

// --cache-type (the target's KV cache) and --cache-type-draft: f32 | f16 | q8 | q4. The draft
// stays f32 by default: a quantized draft cache is known to collapse acceptance elsewhere.
struct CacheTypes {
  std::string target = "f32", draft = "f32";
};
void add_cache_type_options(CLI::App* sub, CacheTypes& c);
// Parses both into the pair's options; throws dflash::Error for an unknown name (a head_dim
// the format cannot take is refused by load_pair).
void apply_cache_types(const CacheTypes& c, PairOptions& pair);

// --simd-target NAME: holds Highway's dispatch to one SIMD target this CPU runs (Highway's name:
// AVX3, AVX2, SSE4, EMU128, ...), so that tests can record and compare what each target
// computes; empty keeps the best. hold_simd_target throws dflash::Error for a target the CPU lacks.
void add_simd_target_option(CLI::App* sub, std::string& target);
void hold_simd_target(const std::string& name);

std::vector<int32_t> parse_id_list(const std::string& s);

}  // namespace dflash::cli
