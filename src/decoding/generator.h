#pragma once
// Plain autoregressive decoding, driven one step at a time so that a server can interleave,
// stream and cancel. The speculative decoder implements the same interface.
#include <atomic>
#include <cstdint>
#include <functional>
#include <string>
#include <vector>

#include "decoding/logprobs.h"
#include "decoding/sampler.h"
#include "decoding/step_batcher.h"
#include "decoding/token_constraint.h"
#include <memory>

#include "models/target_model.h"

namespace dflash {

struct GenerateParams {
  SamplingParams sampling;
  int max_tokens = 256;
  std::vector<int32_t> stop_ids;  // end-of-sequence ids; the stop token is emitted, then done
  bool ignore_eos = false;
  int chunk_size = 512;           // prefill chunk; results do not depend on it
  // A recurrent state keeps one checkpoint in the prompt (SequenceState::keep_checkpoint) for
  // the next request's prefix reuse: at this length when 0 < checkpoint_at < the prompt's
  // length (the server passes where a follow-up turn's prompt will part from this one), else
  // one row short of the prompt's end.
  int checkpoint_at = -1;
  // -1: no logprobs (nothing computed: a log-softmax over a 248k vocabulary per token is not
  // free). 0..kMaxTopLogprobs: each generated token's logprob plus that many alternatives.
  int logprobs = -1;
  // Structured output / forced tool calls: every token is chosen from the tokens this
  // constraint allows (token_constraint.h); it is advanced past every emitted and forced
  // token. Shared so that a request's segments (a think cap restarts generation) keep one.
  std::shared_ptr<TokenConstraint> constraint;
  // The most tokens the request may still emit over all its segments, where its client set a
  // bound (max_tokens); -1: none but the context's room, which says nothing of when it ends.
  // Beside other slots drafting is priced by it (StepBatcher::decide, BatchPricing::price_ahead).
  int horizon = -1;
};

struct Timings {
  int prompt_tokens = 0, generated_tokens = 0;
  double prefill_s = 0, decode_s = 0, ttft_s = 0;
  double mask_s = 0;  // in the constraint (masks and moves): target rows and the draft's walk
  double prefill_tok_s() const { return prefill_s > 0 ? prompt_tokens / prefill_s : 0; }
  // Tokens after the first, over the time after the first (the first comes with prefill).
  double decode_tok_s() const { return decode_s > 0 && generated_tokens > 1 ? (generated_tokens - 1) / decode_s : 0; }
};

// A generator's context kept outside it (the server's prompt cache): the tokens of a prefix
// and the states at its end, the target's and, when speculating, the draft's.
struct GeneratorSnapshot {
  std::vector<int32_t> tokens;
  std::unique_ptr<StateSnapshot> target, draft;
  size_t bytes() const {
    return tokens.size() * sizeof(int32_t) + (target ? target->bytes() : 0) + (draft ? draft->bytes() : 0);
  }
};

enum class FinishReason { None, Stop, Length, Cancelled };
const char* finish_reason_name(FinishReason r);

class Generator {
 public:
  Generator(const TargetModel& model, int ctx_size);
  virtual ~Generator() = default;

  // Throws dflash::Error when the prompt does not fit the context.
  virtual void start(const std::vector<int32_t>& prompt, const GenerateParams& params);
  // Appends this step's new tokens to `out`; returns false once generation has finished.
  virtual bool step(std::vector<int32_t>& out);
  // Thread-safe: the step in progress finishes, the next one returns false (Cancelled).
  void cancel() { cancelled_.store(true); }
  // Appends tokens to the context as if generated (e.g. "</think>\n\n" when a thinking
  // budget runs out); they count against max_tokens and are fed on the next step.
  void force_tokens(const std::vector<int32_t>& ids);
  // Prompt tokens whose KV came from the previous request's cache (prefix reuse).
  int cached_tokens() const { return cached_tokens_; }
  int generated() const { return n_generated_; }
  // Runs this generator's passes through a batcher shared with other slots (continuous
  // batching in the server); null: straight to the model. Outputs do not depend on it.
  void set_batcher(StepBatcher* b) { batcher_ = b; }
  // Positions of the prompt/context this generator's state holds now.
  int cached_length() const { return state_->length(); }
  // Between requests: a copy of the context a later request may reuse (null: none), and
  // taking such a copy back in place of the current context. The next start() reuses it as
  // it reuses the previous request's cache; outputs do not depend on it.
  virtual std::unique_ptr<GeneratorSnapshot> save() const;
  virtual bool restore(const GeneratorSnapshot& s);

  FinishReason finish_reason() const { return finish_; }
  const Timings& timings() const { return timings_; }
  const std::vector<int32_t>& tokens() const { return tokens_; }  // prompt + generated
  // With GenerateParams::logprobs >= 0: one entry per token emitted since start(), in order
  // (forced tokens have none: the model did not choose them).
  const std::vector<TokenLogprobs>& logprobs() const { return logprobs_; }

 protected:
  // What every step checks first: false once generation has ended (finished, cancelled, or
  // asked for no tokens), with finish_reason set.
  bool may_step();
  // Prefills prompt tokens not yet in the cache; returns the last row's logits.
  void prefill();
  // Where a prefill keeps the prompt checkpoint of a recurrent state (SequenceState, and
  // GenerateParams::checkpoint_at); n_prompt_ (none) for a KV cache.
  int checkpoint_row() const;
  // Records a generated token chosen from the target's logits `row` at its position (their
  // log-softmax is kept when logprobs are asked for) and moves the constraint past it, unless
  // the caller already did (`constraint_moved`); returns true if generation must stop.
  bool emit(int32_t t, const float* row, std::vector<int32_t>& out, bool constraint_moved = false);
  // The constraint's mask for the next token; null when the request has none.
  const uint64_t* allowed_now() { return params_.constraint ? timed_mask(*params_.constraint) : nullptr; }
  // c.allowed() and c.accept(t), their time added to timings_.mask_s.
  const uint64_t* timed_mask(TokenConstraint& c);
  bool timed_accept(TokenConstraint& c, int32_t t);
  bool is_stop(int32_t t) const;
  // The model pass of this sequence's rows, batched with other slots' when a batcher is set.
  void run_forward(const ForwardArgs& a);
  // Other model work (a draft's passes) under the batcher's compute lock.
  // Returns the seconds f itself took (not the wait for the lock).
  double run_compute(const std::function<void()>& f);
  // The next prefill chunk's length (smaller beside other active slots).
  int prefill_chunk() const { return batcher_ ? batcher_->prefill_rows(params_.chunk_size) : params_.chunk_size; }

  const TargetModel& model_;
  std::unique_ptr<SequenceState> state_;  // the target's: its KV cache (and any recurrent state)
  GenerateParams params_;
  Sampler sampler_{SamplingParams{}};
  std::vector<int32_t> tokens_;
  std::vector<float> logits_;
  std::vector<TokenLogprobs> logprobs_;
  // Rows not yet in the KV cache: the last sampled token plus any forced ones.
  int pending_rows() const { return int(tokens_.size()) - state_->length(); }
  int n_prompt_ = 0, n_generated_ = 0, cached_tokens_ = 0;
  bool started_ = false, prefilled_ = false;
  FinishReason finish_ = FinishReason::None;
  Timings timings_;
  double t_start_ = 0, t_first_ = 0;
  std::atomic<bool> cancelled_{false};
  StepBatcher* batcher_ = nullptr;
};

}  // namespace dflash
