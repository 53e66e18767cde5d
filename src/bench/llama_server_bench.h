#pragma once
// dflash bench --draft ... --vs-llama-server PATH: llama.cpp's own DFlash (a llama-server binary
// the user built, `--spec-type draft-dflash`) on the same pair and the same code prompts, plain
// and per block size, beside dflash's figures of the same command. The measuring is
// tools/bench/llama_server_peer.py's (it converts the pair to GGUF, starts the server on loopback
// once per mode and reads the server's own timings); this runs it and sets the two side by side.
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

namespace dflash::bench {

struct LlamaServerPeerOptions {
  std::string server;        // path of a llama-server binary
  std::string model, draft;  // target folder or .gguf file; DFlash / DFlash2 draft folder
  std::string weights = "q4";  // dflash's --weights: q4 -> q4_0, q8 -> q8_0, bf16
  std::vector<int> block_sizes{4, 8};  // dflash's B; llama-server's --spec-draft-n-max is B - 1
  int n_prompts = 0;         // code prompts (0: all of them)
  int gen_tokens = 300;      // per prompt
  int threads = 0;           // 0: as many as the machine has
  std::string prompts_file;  // empty: models/demo/bench_prompts.json
};

// What run_llama_server_peer checks before it starts anything (so that a wrong path fails
// before dflash's own run, not after it). Throws dflash::Error with the reason.
void check_llama_server_peer(const LlamaServerPeerOptions& o);

// Runs the peer; returns its JSON ({engine, server, type, threads, runs: [{n_max, tok_s,
// accept_rate, texts, ...}]}). Throws dflash::Error with the reason when the binary is not an
// executable file, python3 or the peer script is missing, or the peer fails.
nlohmann::json run_llama_server_peer(const LlamaServerPeerOptions& o);

// Prints both engines' code-regime figures side by side: dflash's plain tok/s and speedup per
// block size (from run_dflash_bench's document) and llama-server's at the same block sizes.
void print_llama_server_comparison(const nlohmann::json& dflash_doc, const nlohmann::json& peer);

}  // namespace dflash::bench
