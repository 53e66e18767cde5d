#pragma once
// What decoding, the server, the drafts and the benchmarks see of a target model, whatever
// its family. A family (models/dense: Qwen3, Qwen2, Llama; next the Qwen3.5 hybrids) is a
// folder with a tensor table, a config reader and a forward, and implements this class.
//
// One forward at a time per model (its activation buffers are its own); several sequences go
// through one forward as a batch of (state, rows) pairs, and each row's logits are bitwise
// what it would get alone (kernels/backend.h: batch invariance).
#include <cstdint>
#include <memory>
#include <optional>
#include <span>
#include <string>
#include <vector>

#include "kernels/backend.h"
#include "kernels/weight_matrix.h"
#include "models/model_config.h"
#include "models/sequence_state.h"

namespace dflash {

struct LoadOptions {
  std::optional<WType> weights;      // nullopt: keep the checkpoint's own dtype
  bool populate = false;             // read all pages at load (benchmarks)
  std::shared_ptr<Backend> backend;  // null: a CPU backend on every core
};

// The backend of `opt`, made (CPU, all cores) and stored there when it has none.
const std::shared_ptr<Backend>& backend_of(LoadOptions& opt);

// Rows of one sequence in a forward pass.
struct ForwardArgs {
  const int32_t* tokens = nullptr;
  int n = 0;                   // rows in this call, at positions state.length() ...
  int logits_from = -1;        // compute logits for rows [logits_from, n); -1 = last row only
  float* logits = nullptr;     // [(n - logits_from)][vocab]
  const std::vector<int>* capture_layers = nullptr;  // layer ids whose outputs to keep (draft taps)
  float* capture = nullptr;    // [n][capture_layers->size()][hidden]
  // The caller may roll back to any of these rows' positions afterwards (a verify block):
  // a recurrent state keeps a snapshot per row. A KV cache needs nothing.
  bool rollback_rows = false;
};

struct SequenceRows {
  SequenceState* state = nullptr;
  ForwardArgs rows;
};

class TargetModel {
 public:
  virtual ~TargetModel() = default;

  // Reads a Hugging Face folder or a GGUF file and builds the model of its family.
  static std::unique_ptr<TargetModel> load(const std::string& path, LoadOptions opt);

  virtual const ModelConfig& config() const = 0;
  virtual const Backend& backend() const = 0;

  // A new sequence of up to `capacity` positions, in the KV cache format set_cache_type chose.
  virtual std::unique_ptr<SequenceState> new_state(int capacity) const = 0;
  // f32, f16, q8 (Q8_0) or q4 (Q4_0); throws dflash::Error if the model cannot take it.
  virtual void set_cache_type(WType t) = 0;
  virtual WType cache_type() const = 0;

  // Runs each sequence's rows through the model, appending them to its state. A state must
  // come from this model's new_state, and appear once in a batch.
  virtual void forward_batch(std::span<SequenceRows> batch) const = 0;
  void forward(SequenceState& state, const ForwardArgs& rows) const {
    SequenceRows one{&state, rows};
    forward_batch({&one, 1});
  }

  // The token's embedding row (drafts embed their block with the target's table).
  virtual void embed(int32_t token, float* out) const = 0;
  // Final norm then LM head, for `rows` hidden states ([rows][hidden] -> [rows][vocab]).
  virtual void logits_from_hidden(const float* h, int rows, float* logits) const = 0;
  // LM head only, for rows a draft has already normed with its own final norm.
  virtual void lm_head_logits(const float* normed, int rows, float* logits) const = 0;

  virtual size_t weight_bytes() const = 0;  // bytes streamed per decode step
  virtual WType weight_type() const = 0;
  virtual std::string family() const = 0;   // "dense"
};

}  // namespace dflash
