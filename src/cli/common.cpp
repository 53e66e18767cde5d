#include "cli/common.h"

#include <cstdint>
#include <sstream>

#include <CLI/CLI.hpp>
#include <hwy/targets.h>

#include "models/dflash/dflash_draft.h"
#include "util/error.h"

namespace dflash::cli {

std::vector<int32_t> parse_id_list(const std::string& s) {
  std::vector<int32_t> ids;
  std::stringstream ss(s);
  std::string item;
  while (std::getline(ss, item, ',')) {
    item.erase(0, item.find_first_not_of(" \t"));
    item.erase(item.find_last_not_of(" \t") + 1);
    if (item.empty()) continue;
    try {
      size_t used = 0;
      long v = std::stol(item, &used);
      if (used != item.size() || v < 0 || v > INT32_MAX) throw std::invalid_argument(item);
      ids.push_back(int32_t(v));
    } catch (const std::exception&) {
      throw Error("invalid token id '" + item + "' in id list");
    }
  }
  return ids;
}

void add_cache_type_options(CLI::App* sub, CacheTypes& c) {
  sub->add_option("--cache-type", c.target, "Target KV cache: f32 | f16 | q8 | q4 (q8/q4: blocks of 32, fp16 scale)")
      ->capture_default_str();
  sub->add_option("--cache-type-draft", c.draft, "Draft KV cache: f32 | f16 | q8 | q4")->capture_default_str();
}

void apply_cache_types(const CacheTypes& c, PairOptions& pair) {
  pair.cache_type = parse_kv_type(c.target);
  pair.draft_cache_type = parse_kv_type(c.draft);
}

void add_simd_target_option(CLI::App* sub, std::string& target) {
  sub->add_option("--simd-target", target, "Testing: hold the kernels to this Highway target (e.g. AVX2)");
}

void hold_simd_target(const std::string& name) {
  if (name.empty()) return;
  std::string names;
  const int64_t supported = hwy::SupportedTargets();
  for (int64_t bit = 1; bit != 0 && bit <= supported; bit <<= 1) {
    if (!(supported & bit)) continue;
    if (name == hwy::TargetName(bit)) {
      hwy::SetSupportedTargetsForTest(bit);
      return;
    }
    names += std::string(names.empty() ? "" : ", ") + hwy::TargetName(bit);
  }
  throw Error("--simd-target '" + name + "' is not one this CPU runs (" + names + ")");
}

}  // namespace dflash::cli
