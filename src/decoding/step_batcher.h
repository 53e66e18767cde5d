#pragma once
// Continuous batching across a server's slots. Each slot's generator runs on its own thread
// and hands its rows (a decode row, a verify block, a prefill chunk) to forward(); the batcher
// gathers the calls of every active slot and runs them as one forward_batch over the weights,
// then wakes each caller with its own logits. On CPU a pass is bound by reading the weights,
// so k sequences in one pass cost little more than one.
//
// Batching changes speed only: a row's logits are bitwise what it gets alone, whatever else is
// in the pass (batch invariance, docs/architecture.md), and each sequence keeps its own state.
//
// When a pass runs: as soon as every active slot waits in forward(); or, while no slot is in a
// draft pass (draft(), compute()), when the oldest waiter has waited the longer of max_wait and a
// quarter of a recent pass (a slot busy elsewhere:
// sampling, a slow client). A slot in a draft pass is about to verify, so the others wait for
// it, and the wait counts from the end of the latest pass or draft pass as well. The slots that
// draft at a step are gathered the same way into one draft pass (draft()).
// All model compute (passes and the drafts' work, which also reads the target's embedding
// and head) takes one lock: a model's activation buffers and the backend's thread pool
// serve one pass at a time.
#include <atomic>
#include <condition_variable>
#include <cstdint>
#include <exception>
#include <algorithm>
#include <functional>
#include <mutex>
#include <vector>

#include "decoding/batch_pricing.h"
#include "models/drafter.h"
#include "models/target_model.h"

namespace dflash {

struct BatchStats {
  uint64_t passes = 0, rows = 0, sequences = 0;  // totals over all passes
  int last_sequences = 0, last_rows = 0;         // of the latest pass
  double pass_s = 0;                             // time inside the passes, all together
  int active = 0;                                // slots generating now
  double goodput = 0;                            // tokens/s of all slots over recent passes
  double row_s = 0;      // seconds one more row adds to a pass like the latest (batch_pricing.h)
  uint64_t draft_passes = 0, draft_jobs = 0;  // draft passes and the slots' blocks in them
  double draft_pass_s = 0;                     // time inside the draft passes
};

class StepBatcher {
 public:
  // prefill_budget: the most prompt rows a slot puts in one pass while other slots are active,
  // so that a long prompt does not stall their decoding (alone it prefills in full chunks).
  StepBatcher(const TargetModel& model, int prefill_budget = 64, double max_wait_s = 0.002);

  // A slot starts / ends a generation (Slot below does both).
  void join();
  void leave();
  class Slot {
   public:
    explicit Slot(StepBatcher* b) : b_(b) { if (b_) b_->join(); }
    ~Slot() { if (b_) b_->leave(); }
    Slot(const Slot&) = delete;
    Slot& operator=(const Slot&) = delete;
   private:
    StepBatcher* b_;
  };

  // Runs `rows` of `state` in the next pass; returns when they are done. Throws dflash::Error
  // when its own rows cannot go (context full, a token outside the vocabulary: the others'
  // pass runs without them), or what the pass threw (an error inside a pass is every member's).
  void forward(SequenceState& state, const ForwardArgs& rows);
  // Runs f under the compute lock (other model work: a draft's catch-up on context).
  void compute(const std::function<void()>& f);
  // Runs a slot's draft job together with those of the other slots that draft at this step:
  // one Drafter::draft_batch, one pass over the draft's weights and the target's head for
  // all of them (a slot's proposal is bitwise what it gets alone). Gathered like forward():
  // it runs once every active slot waits here or in forward(), or when the oldest job has
  // waited as long as a pass's waiters do. Throws dflash::Error when its own job cannot go
  // (the draft's context full: the others' pass runs without it), or what the pass threw.
  // slot: the slot's target state, whose declared block (decide()) this job drafts.
  void draft(const Drafter& d, DraftJob& job, const SequenceState& slot);
  // A prefill chunk's length: `chunk` alone, at most prefill_budget beside other slots.
  int prefill_rows(int chunk) const;
  // A slot's block for the next pass (1: a plain row), chosen by `choose` from the price of
  // drafting now (batch_pricing.h; null when the slot decides alone). It runs under the
  // batcher's lock and the block it returns is kept as the slot's declared rows until its next
  // forward(): slots that decide at the same step see each other's blocks and are priced beside
  // the rows the next pass will hold, not those of the latest one. Each priced beside the
  // latest pass as it was, the weak grown Qwen3-1.7B draft's four slots all chose blocks of 8
  // after two lucky probes and a pass of 4 rows (29 ms) became one of 32 (128-213 ms).
  // my_rows: the rows the slot put in the latest pass; max_extra: rows past a plain row;
  // context_rows: its context rows waiting for the draft (BatchQuote::catch_up_s), and
  // context_share the prior for their price (BatchPricing::quote).
  // tokens_left: the most tokens the slot's request may still emit (-1: no bound the client
  // set). While nobody waits for a slot (set_queued) and every active slot has said its own, a
  // slot more than a block ahead of the batch's laggard is priced so (BatchPricing::price_ahead).
  int decide(const SequenceState& slot, int my_rows, int max_extra, int context_rows, double context_share,
             int tokens_left, const std::function<int(BatchQuote*)>& choose);
  // How many requests wait for a slot (a server's queue); without it none ever do (a closed
  // batch, as in `bench --concurrency`). Called under the batcher's lock: it must not call back.
  void set_queued(std::function<int()> queued) {
    std::lock_guard<std::mutex> lk(mu_);
    queued_ = std::move(queued);
  }
  void add_tokens(int n, bool prompt = false) { pricing_.add_tokens(n, prompt); }  // emitted, or prompt rows read
  // A slot's block: what it measured, shared with the other slots (BatchPricing::record_block),
  // and, if it was a probe paid from the batch's account, what it came to (settle_probe).
  void record_block(int B, int accepted, int judged, double draft_s, const ProbeSettlement& probe = {});
  // A slot's catch-up outside a draft pass (its waiting context rows fed alone): rows, seconds.
  void record_context(int rows, double seconds);

  BatchStats stats() const;

 private:
  struct Pending {
    SequenceRows rows;
    double arrived = 0;
    bool done = false;
    std::exception_ptr error;
  };
  struct PendingDraft {
    const SequenceState* slot = nullptr;  // whose declared block (decide()) the job drafts
    const Drafter* drafter = nullptr;
    DraftJob* job = nullptr;
    double arrived = 0;
    bool done = false;
    std::exception_ptr error;
  };
  // A block a slot chose for its next pass, and whether its draft pass has begun (a block still
  // to draft joins the next draft pass: BatchQuote::joining).
  struct Declared {
    const SequenceState* slot;
    int B;
    bool drafted = false;
  };
  // A slot's tokens left as it said at its latest decide(), and the pass count then: a slot
  // that has not decided for a few passes (prefilling, gone) is not known.
  struct Horizon {
    const SequenceState* slot;
    int left;
    uint64_t pass;
  };
  // Whether `slot` (tokens_left of its own) is more than `block` tokens ahead of the laggard
  // of a closed batch: false too when someone waits for a slot or not every active slot's
  // horizon is known.  mu_ held.
  bool ahead_of_laggard(const SequenceState& slot, int tokens_left, int block);
  void forget(const SequenceState* slot);  // mu_ held
  bool may_run(double now) const;    // mu_ held
  bool may_draft(double now) const;  // mu_ held
  void run_pass(std::unique_lock<std::mutex>& lk);  // mu_ held on entry and exit
  void run_drafts(std::unique_lock<std::mutex>& lk);  // mu_ held on entry and exit
  bool drafts_waiting() const { return drafting_ || !drafts_.empty(); }  // mu_ held

  const TargetModel& model_;
  const int prefill_budget_;
  const double max_wait_s_;
  double pass_ema_s_ = 0;  // recent passes' time: slots that are a pass behind get a share of it
  // When the latest pass ended: the wait for slots still sampling counts from there too, so the
  // slots of that pass can join the ones that queued during it (two groups in turn would
  // otherwise never merge again: each would find the other's rows waiting and go alone).
  double last_pass_end_ = 0;
  // When the latest draft pass ended: its slot is about to hand in its verify block, so the
  // others' wait counts from there too (else a slot that queued during the draft found its
  // wait long over the moment the draft ended, went alone, and the verify went alone after
  // it: two speculating streams ran 1.35 sequences per pass).
  double last_compute_end_ = 0;
  double wait_from() const;  // mu_ held, pending_ not empty
  double wait_s() const { return std::max(max_wait_s_, 0.25 * pass_ema_s_); }
  mutable std::mutex mu_;
  std::condition_variable cv_;
  std::vector<Pending*> pending_;
  std::vector<PendingDraft*> drafts_;
  std::vector<Declared> declared_;
  std::vector<Horizon> horizons_;
  std::function<int()> queued_;
  // The blocks in the latest pass: their slots and rows past the plain row (B - 1).
  std::vector<std::pair<const SequenceState*, int>> last_blocks_;
  int active_ = 0, in_compute_ = 0;
  bool running_ = false, drafting_ = false;
  BatchStats stats_;
  std::mutex compute_mu_;
  BatchPricing pricing_;
};

}  // namespace dflash
