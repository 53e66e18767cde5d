#include "models/model_files.h"

#include <unistd.h>

#include <algorithm>
#include <climits>
#include <filesystem>

#include "formats/gguf.h"
#include "models/gguf_tokenizer.h"
#include "util/error.h"
#include "util/mapped_file.h"

namespace dflash {

static std::string exe_dir() {
  char buf[PATH_MAX];
  ssize_t n = ::readlink("/proc/self/exe", buf, sizeof(buf) - 1);
  if (n <= 0) return ".";
  std::string p(buf, size_t(n));
  return p.substr(0, p.rfind('/'));
}

std::string resolve_model_dir(const std::string& given) {
  if (!given.empty()) return given;
  // The demo pairs ship in the source tree; the binary usually sits in build/ beneath it. The
  // Qwen3.5 hybrid pair (the family our users serve) comes first, the dense one after it.
  for (const std::string& base : {std::string("."), exe_dir() + "/..", exe_dir() + "/../share/dflash"})
    for (const char* demo : {"/models/demo35/target", "/models/demo/target"}) {
      const std::string d = base + demo;
      if (file_exists(d + "/config.json")) return d;
    }
  throw Error("no --model given and no demo model (models/demo35/target, models/demo/target) was found");
}

std::string shipped_path(const std::string& rel) {
  for (const std::string& base : {std::string("."), exe_dir() + "/..", exe_dir() + "/../share/dflash"})
    if (file_exists(base + "/" + rel + "/config.json")) return std::filesystem::path(base + "/" + rel).lexically_normal().string();
  return rel;
}

std::string demo_draft_beside(const std::string& target_dir) {
  // The DFlash2 draft accepts more than the DFlash one (held-out tau 3.2 against 1.6 at block
  // size 8 on the dense demo pair), so it is preferred.
  for (const char* name : {"/../draft2", "/../draft"}) {
    const std::string d = std::filesystem::path(target_dir + name).lexically_normal().string();
    if (file_exists(d + "/config.json")) return d;
  }
  return "";
}

std::optional<WType> parse_weights_option(const std::string& s) {
  if (s == "native") return std::nullopt;
  return parse_wtype(s);
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

}  // namespace dflash
