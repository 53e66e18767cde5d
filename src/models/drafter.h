#pragma once
// What the speculative loop needs from a draft model. DFlash (v1) implements it; DFlash2 and
// test drafters do too.
#include <cstdint>
#include <memory>
#include <stdexcept>
#include <vector>

#include "models/sequence_state.h"

namespace dflash {

// Tokens a drafter chose itself (DFlash2's candidate selector) instead of leaving the choice
// to the loop's argmax/sampling over its logits.
struct DraftTokens {
  std::vector<int32_t> tokens;             // the B-1 proposals, block rows 1..B-1
  // Sampled walks only: per proposal, the ids the drafter could have drawn and their
  // probabilities (q, zero for every other id), for rejection sampling.
  std::vector<std::vector<int32_t>> cand;
  std::vector<std::vector<float>> q;
  bool finite = true;                      // false: the draft's logits were not all finite
};

// One sequence's share of a draft pass (Drafter::draft_batch): first the context rows it has
// waiting (target taps), then one block.
struct DraftJob {
  SequenceState* state = nullptr;
  const float* context = nullptr;  // [context_n][feature_dim]
  int context_n = 0;
  int32_t first = 0;               // block row 0: the last committed token
  int B = 0;                       // block size, >= 2
  // Token drafters (proposes_tokens): temperature and uniforms as propose_tokens takes them,
  // the proposal in `tokens`. Logit drafters: the rows' logits in `logits` ([B-1][vocab]).
  float temperature = 0;
  const double* uniforms = nullptr;
  DraftTokens* tokens = nullptr;
  float* logits = nullptr;
  // Out: this job's seconds, its share of the pass by rows (context rows of the context part,
  // block rows of the block part), so that slots drafting together each pay their part.
  double context_s = 0, block_s = 0;
};

class Drafter {
 public:
  virtual ~Drafter() = default;
  virtual int block_size() const = 0;                        // the checkpoint's default
  virtual const std::vector<int>& target_layers() const = 0;  // target layers to tap
  virtual int feature_dim() const = 0;                       // floats of taps per position
  // The draft's own sequence state (its KV cache of context rows), up to `capacity` positions.
  virtual std::unique_ptr<SequenceState> new_state(int capacity) const = 0;
  // Appends context rows (target taps, [n][feature_dim]) at positions state.length()...
  virtual void add_context(SequenceState& state, const float* features, int n) const = 0;
  // One block [first, MASK x (B-1)] at positions state.length()..; writes logits of rows
  // 1..B-1 ([B-1][vocab]); the state keeps only context rows afterwards.
  virtual void propose(SequenceState& state, int32_t first, int B, float* logits) const = 0;

  // Drafters that pick their own tokens return true and implement propose_tokens; the loop
  // then never looks at their logits.
  virtual bool proposes_tokens() const { return false; }
  // Like propose, but returns tokens. temperature <= 0: the greedy choice; otherwise one
  // draw per row from uniforms[0..B-2] (in [0, 1)), with q filled in.
  virtual void propose_tokens(SequenceState& /*state*/, int32_t /*first*/, int /*B*/, float /*temperature*/,
                              const double* /*uniforms*/, DraftTokens& /*out*/) const {
    throw std::logic_error("this drafter proposes logits, not tokens");
  }

  // Bytes of weights one context row goes through (fc, each layer's k/v projections): over the
  // target's weight_bytes, the prior for a context row's price beside other slots before one
  // is measured (batch_pricing.h). 0: not known (priced as a target row).
  virtual size_t context_row_bytes() const { return 0; }

  // Several sequences' context rows and blocks in one pass over the draft's weights (and the
  // target's head), as slots drafting at the same step hand them in. Each job's proposal and
  // state are bitwise what add_context then propose / propose_tokens give it alone (batch
  // invariance, docs/architecture.md). This one runs the jobs one after another; drafters
  // with a batched forward override it.
  virtual void draft_batch(const std::vector<DraftJob*>& jobs) const;
};

}  // namespace dflash
