#pragma once
// dflash bench --concurrency 1,2,4,8: aggregate throughput and per-request latency with several
// requests generating at once through one StepBatcher (the server's --parallel), plain and
// speculative, on the same prompts in the same run.
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

namespace dflash::bench {

struct ConcurrencyBenchOptions {
  std::string model, draft, prompts_file, weights = "bf16";
  // The target's KV cache for every slot, as `dflash serve --cache-type` (default f32, the
  // server's). llama.cpp's own default is f16: with --vs-llamacpp, f16 compares like with like.
  std::string cache_type = "f32";
  std::vector<int> levels{1, 2, 4, 8};
  int threads = 0, gen_tokens = 64, block_size = 0, rounds = 1;
  bool adaptive = true, json = false;
  // llama.cpp's batched sequences (node-llama-cpp, tools/bench/llamacpp_peer.mjs) on the same
  // prompts and the same file: `model` must then be a .gguf.
  bool vs_llamacpp = false;
};

// Returns {levels: [{streams, plain: {...}, dflash: {...}}], ...} (what --json prints).
nlohmann::json run_concurrency_bench(const ConcurrencyBenchOptions& o);

}  // namespace dflash::bench
