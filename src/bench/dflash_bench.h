#pragma once
// dflash bench --draft: plain and DFlash speculative decoding on the same prompts, and the
// measured cost model that predicts the speedup.
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

namespace dflash::bench {

struct DflashBenchOptions {
  std::string model, draft, draft2, prompts_file, weights = "bf16";
  std::vector<int> block_sizes{2, 4, 8, 16};
  int threads = 0, gen_tokens = 0, long_prompt_tokens = 3000, n_prompts = 0, rounds = 3;
  bool json = false, no_adaptive = false;
  // "on" / "off": the controller on or off for every block size; "both": each block size
  // measured both ways (same prompts, alternating); empty: on unless no_adaptive.
  std::string controller;
  // Real model shapes (random weights) whose verify and draft costs turn this run's tau into a
  // predicted speedup: where the demo pair is too small to be memory-bound, these are.
  std::vector<std::string> predict_shapes;
  std::string predict_weights = "q4";
  int predict_draft_layers = 5;  // z-lab's published Qwen3 DFlash drafts have 5 layers
};

// Plain vs DFlash decoding on the same prompts in one run, per regime and block size, plus the
// measured cost model (target forward of K rows relative to one, draft time per block).
// Returns {regimes, cost_model[, predicted_shapes]} (what --json prints; `bench --plot` draws it).
nlohmann::json run_dflash_bench(const DflashBenchOptions& o);

}  // namespace dflash::bench
