#pragma once
// The one recipe for loading what a command or the server runs: the backend, the tokenizer,
// the target, the draft (optional), the KV cache formats and the stop ids. serve, generate,
// logits and the benchmarks all load through it, so they agree on every rule.
#include <cstdint>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "kernels/backend.h"
#include "models/dflash/dflash_draft.h"
#include "models/target_model.h"
#include "tokenizer/tokenizer.h"

namespace dflash {

struct PairOptions {
  std::string model;                 // a Hugging Face folder or a .gguf file (already resolved)
  std::string draft;                 // a DFlash / DFlash2 folder or dflash .gguf; empty: none
  std::optional<WType> weights;      // nullopt: each checkpoint's own dtype
  WType cache_type = WType::F32;     // the target's KV cache format
  WType draft_cache_type = WType::F32;
  int threads = 0;                   // 0: every core
  bool populate = false;             // read every weight page at load (benchmarks)
  bool need_tokenizer = false;       // throw when the model has none (the server)
  std::shared_ptr<Backend> backend;  // null: a CPU backend with `threads` threads
};

struct ModelPair {
  std::shared_ptr<Backend> backend;
  std::unique_ptr<Tokenizer> tokenizer;  // null when the model has none
  std::unique_ptr<TargetModel> target;
  std::unique_ptr<DFlashDraft> draft;    // null: plain decoding
  std::vector<int32_t> stop_ids;         // the target's eos ids and the tokenizer's
};

// Throws dflash::Error (naming the file) for anything missing or not fitting.
ModelPair load_pair(const PairOptions& o);

}  // namespace dflash
