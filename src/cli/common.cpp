#include "cli/common.h"

#include <unistd.h>

#include <algorithm>
#include <climits>
#include <sstream>

#include <CLI/CLI.hpp>
#include <hwy/targets.h>

#include "formats/gguf.h"
#include "models/dflash_draft.h"
#include "models/gguf_load.h"
#include "util/error.h"
#include "util/mapped_file.h"

namespace dflash::cli {

static std::string exe_dir() {
  char buf[PATH_MAX];
  ssize_t n = ::readlink("/proc/self/exe", buf, sizeof(buf) - 1);
  if (n <= 0) return ".";
  std::string p(buf, size_t(n));
  return p.substr(0, p.rfind('/'));
}

std::string resolve_model_dir(const std::string& given) {
  if (!given.empty()) return given;
  // The demo pair ships in the source tree; the binary usually sits in build/ beneath it.
  for (const std::string& base : {std::string("."), exe_dir() + "/..", exe_dir() + "/../share/dflash"}) {
    const std::string d = base + "/models/demo/target";
    if (file_exists(d + "/config.json")) return d;
  }
  throw Error("no --model given and the demo model (models/demo/target) was not found");
}

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

std::optional<WType> parse_weights_option(const std::string& s) {
  if (s == "native") return std::nullopt;
  return parse_wtype(s);
}

void add_cache_type_options(CLI::App* sub, CacheTypes& c) {
  sub->add_option("--cache-type", c.target, "Target KV cache: f32 | f16 | q8 | q4 (q8/q4: blocks of 32, fp16 scale)")
      ->capture_default_str();
  sub->add_option("--cache-type-draft", c.draft, "Draft KV cache: f32 | f16 | q8 | q4")->capture_default_str();
}

void apply_cache_types(const CacheTypes& c, Transformer& model, DFlashDraft* draft) {
  model.set_cache_type(parse_kv_type(c.target));
  const WType dt = parse_kv_type(c.draft);
  if (draft) draft->set_cache_type(dt);
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

std::unique_ptr<Tokenizer> load_tokenizer_if_present(const std::string& dir) {
  if (has_gguf_suffix(dir)) {  // a GGUF without tokenizer.ggml.* has no tokenizer either
    if (!GgufFile(dir).find("tokenizer.ggml.model")) return nullptr;
    return std::make_unique<Tokenizer>(load_gguf_tokenizer(dir));
  }
  if (!file_exists(dir + "/tokenizer.json")) return nullptr;
  return std::make_unique<Tokenizer>(Tokenizer::from_folder(dir));
}

std::vector<int32_t> stop_ids_for(const ModelConfig& cfg, const Tokenizer* tok) {
  std::vector<int32_t> ids(cfg.eos_ids.begin(), cfg.eos_ids.end());
  if (tok)
    for (int32_t e : tok->special().eos)
      if (std::find(ids.begin(), ids.end(), e) == ids.end()) ids.push_back(e);
  return ids;
}

std::string simple_chat_prompt(const std::string& user, bool enable_thinking) {
  std::string s = "<|im_start|>user\n" + user + "<|im_end|>\n<|im_start|>assistant\n";
  if (!enable_thinking) s += "<think>\n\n</think>\n\n";
  return s;
}

}  // namespace dflash::cli
