#pragma once
// DFlash speculative decoding: the draft proposes a block, the target verifies it in one
// forward, the accepted prefix plus one bonus token is emitted. Greedy output is token-exact
// with plain decoding (the kernels are batch invariant); at temperature > 0 every emitted
// token is the target's own sample at its position (same seed, same output), or, with
// probabilistic acceptance, a draw from the target's distribution by rejection sampling.
#include <memory>

#include "decoding/generator.h"
#include "decoding/spec_controller.h"
#include "decoding/spec_stats.h"
#include "models/drafter.h"

namespace dflash {

enum class Acceptance { TargetSample, Probabilistic };

struct SpecParams {
  int block_size = 16;      // tokens per verify: the last committed token + block_size-1 drafts
  bool adaptive = true;     // let the controller pick the block size (down to plain decoding)
  Acceptance acceptance = Acceptance::TargetSample;
};

class SpeculativeGenerator : public Generator {
 public:
  SpeculativeGenerator(const TargetModel& target, const Drafter& draft, int ctx_size, SpecParams sp);

  void start(const std::vector<int32_t>& prompt, const GenerateParams& params) override;
  bool step(std::vector<int32_t>& out) override;
  const SpecStats& stats() const { return stats_; }
  std::unique_ptr<GeneratorSnapshot> save() const override;
  bool restore(const GeneratorSnapshot& s) override;

 private:
  void prefill_with_taps();
  bool plain_step(std::vector<int32_t>& out);
  bool spec_step(int B, std::vector<int32_t>& out);
  void fall_back(const std::string& reason);

  const Drafter& draft_;
  SpecParams sp_;
  std::unique_ptr<SequenceState> draft_state_;  // the draft's context rows
  SpecController controller_;
  SpecStats stats_;
  std::vector<float> taps_;  // [rows][feature_dim] of the last target pass
  // A block's draft logits ([B - 1][vocab]) and verify logits ([B][vocab]), kept across blocks
  // (grown to the largest block drafted). Made afresh for each block they were allocated and
  // zero-filled first (4.2 and 4.9 MB at B = 8 on a vocab of 152k) by the slot's thread, while
  // the batch's next pass waited for its rows: in a temporary trace (2026-12-07, not kept) the
  // host time of a block outside the draft and verify passes was 399 us at B = 4 on the grown
  // 1.7B pair against 76 us now (a plain step's: 40 us). The first block at a new largest size still pays its pages (9-14 ms at B = 8 there),
  // once in a slot's life.
  std::vector<float> draft_logits_, verify_logits_;
  // Taps not yet fed to the draft: while the controller keeps speculation off, feeding plain
  // steps' rows one per step cost ~15% of a small target's decode; they and a block's accepted
  // rows go in with the next block's draft pass (beside other slots, one pass for all), or,
  // when a request never probes again, not at all.
  std::vector<float> pending_taps_;
  int pending_n_ = 0;
  int pending_block_n_ = 0;  // of them, the last block's accepted rows (the rest: plain steps')
  int last_rows_ = 1;  // rows this sequence put in its latest pass (the batch's quote needs the others')
  double flush_pending_context();  // returns the draft's own seconds for it
  void drop_oldest_pending(int n);
  // The draft's context rows mirror the target's positions up to a hole: draft rows
  // [0, hole_at_) are target positions [0, hole_at_); gap_ target positions after them are
  // missing (plain steps' rows dropped, drop_oldest_pending), and the rows after the hole
  // follow on. gap_ 0: no hole, draft rows and pending rows mirror every target position.
  int hole_at_ = 0;
  int gap_ = 0;
  bool draft_on_ = true;
  double context_share_ = 0;  // a draft context row's weights over a target row's (quote's prior)
};

}  // namespace dflash
