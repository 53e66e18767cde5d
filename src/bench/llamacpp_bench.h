#pragma once
// dflash bench --vs-llamacpp: the same GGUF file measured by dflash and by llama.cpp (through
// node-llama-cpp's prebuilt CPU library, tools/bench/llamacpp_peer.mjs), one after the other.
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

namespace dflash::bench {

struct LlamaBenchOptions {
  std::vector<std::string> shapes{"qwen2.5-0.5b", "qwen3-1.7b"};
  std::vector<std::string> weights{"q8", "q4"};
  std::string model;  // a .gguf file: benchmark just it
  int threads = 0, prompt_tokens = 512, gen_tokens = 128;
  int rounds = 1;  // of both engines in turn per model; each figure the best of its rounds
  bool json = false;
};

// Runs both engines per (shape, quant) on a temporary random-weight GGUF (deleted afterwards)
// or on opt.model; prints the side-by-side table (or the JSON rows with opt.json) and returns
// the JSON rows. Throws dflash::Error when node or node-llama-cpp is missing.
nlohmann::json run_llamacpp_bench(const LlamaBenchOptions& opt);

// Runs tools/bench/llamacpp_peer.mjs with `args` under node (checking first that node and
// node-llama-cpp are installed); returns the one JSON object it prints. Throws dflash::Error.
nlohmann::json run_llamacpp_peer(const std::string& root, const std::vector<std::string>& args);

// s quoted for /bin/sh (single quotes, inner ones escaped).
std::string shell_quote(const std::string& s);
// $TMPDIR, else /tmp.
std::string temp_dir();

// The repository root holding tools/bench/llamacpp_peer.mjs: $DFLASH_ROOT, else the real
// path of the executable's folder/.., else the current directory.
std::string find_dflash_root();

}  // namespace dflash::bench
