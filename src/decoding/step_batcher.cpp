#include "decoding/step_batcher.h"

#include <algorithm>
#include <chrono>
#include <string>

#include "util/error.h"
#include "util/timer.h"

namespace dflash {

StepBatcher::StepBatcher(const TargetModel& model, int prefill_budget, double max_wait_s)
    : model_(model), prefill_budget_(std::max(1, prefill_budget)), max_wait_s_(max_wait_s) {}

void StepBatcher::join() {
  std::lock_guard<std::mutex> lk(mu_);
  ++active_;
}

void StepBatcher::leave() {
  std::lock_guard<std::mutex> lk(mu_);
  --active_;
  if (active_ == 0) {  // nothing left to price beside
    declared_.clear();
    horizons_.clear();
    last_blocks_.clear();
  }
  cv_.notify_all();  // the waiters may now be every active slot
}

int StepBatcher::prefill_rows(int chunk) const {
  std::lock_guard<std::mutex> lk(mu_);
  return active_ > 1 ? std::min(chunk, prefill_budget_) : chunk;
}

BatchStats StepBatcher::stats() const {
  std::lock_guard<std::mutex> lk(mu_);
  BatchStats s = stats_;
  s.active = active_;
  s.goodput = pricing_.goodput();
  const int R = std::max(1, stats_.last_rows);
  s.row_s = std::max(0.0, pricing_.pass_seconds(R + 1) - pricing_.pass_seconds(R));
  return s;
}

void StepBatcher::record_block(int B, int accepted, int judged, double draft_s, const ProbeSettlement& probe) {
  std::lock_guard<std::mutex> lk(mu_);
  pricing_.record_block(B, accepted, judged, draft_s);
  pricing_.settle_probe(probe);
}

void StepBatcher::record_context(int rows, double seconds) {
  std::lock_guard<std::mutex> lk(mu_);
  pricing_.record_context(rows, seconds);
}

// A horizon older than this many passes is not the slot's any more: a slot decides before each
// of its passes, and one that skipped a few is prefilling a new request or gone.
constexpr uint64_t kHorizonPasses = 3;

bool StepBatcher::ahead_of_laggard(const SequenceState& slot, int tokens_left, int block) {
  std::erase_if(horizons_, [&](const Horizon& h) { return h.slot == &slot || h.pass + kHorizonPasses < stats_.passes; });
  if (tokens_left < 0) return false;
  horizons_.push_back(Horizon{&slot, tokens_left, stats_.passes});
  if (int(horizons_.size()) < active_ || (queued_ && queued_() > 0)) return false;
  int most = 0;
  for (const Horizon& h : horizons_) most = std::max(most, h.left);
  return most - tokens_left > block;
}

int StepBatcher::decide(const SequenceState& slot, int my_rows, int max_extra, int context_rows, double context_share,
                        int tokens_left, const std::function<int(BatchQuote*)>& choose) {
  std::lock_guard<std::mutex> lk(mu_);
  forget(&slot);
  // The others' rows in the next pass: as in the latest, but a slot that verified a block
  // there counts its plain row only unless it has declared a block again since (taken as
  // keeping its block, the others priced every block beside the blocks of the latest pass
  // and drafted at every other step, the steps between plain); and this slot's plain row. A
  // block that joins blocks still to draft pays only its rows in their draft pass.
  int others = stats_.last_rows - my_rows, draft_rows = 0, block_rows = 0;
  for (const auto& [s, extra] : last_blocks_)
    if (s != &slot) others -= extra;
  for (const Declared& d : declared_) {
    block_rows += d.B - 1;
    if (!d.drafted) draft_rows += d.B - 1;
  }
  BatchQuote q = pricing_.quote(active_, std::max(active_ - 1, others) + 1 + block_rows, max_extra, draft_rows,
                                context_rows, context_share, block_rows);
  if (ahead_of_laggard(slot, tokens_left, max_extra + 1)) pricing_.price_ahead(q);
  const int B = choose(q.batched() ? &q : nullptr);
  if (B > 1) declared_.push_back(Declared{&slot, B});
  if (B > 1 && q.probe_claim > 0) pricing_.claim_probe(q.probe_claim);  // a probe, from the batch's account
  return B;
}

void StepBatcher::forget(const SequenceState* slot) {
  std::erase_if(declared_, [&](const Declared& d) { return d.slot == slot; });
}

bool StepBatcher::may_run(double now) const {
  if (running_ || drafting_ || pending_.empty()) return false;
  if (int(pending_.size()) >= active_) return true;
  return in_compute_ == 0 && !drafts_waiting() && now - wait_from() >= wait_s();
}

bool StepBatcher::may_draft(double now) const {
  if (running_ || drafting_ || drafts_.empty()) return false;
  if (int(drafts_.size() + pending_.size()) >= active_) return true;
  return now - std::max(drafts_.front()->arrived, last_pass_end_) >= wait_s();
}

void StepBatcher::draft(const Drafter& d, DraftJob& job, const SequenceState& slot) {
  PendingDraft p;
  p.slot = &slot;
  p.drafter = &d;
  p.job = &job;
  std::unique_lock<std::mutex> lk(mu_);
  p.arrived = now_seconds();
  drafts_.push_back(&p);
  cv_.notify_all();
  while (!p.done) {
    const double now = now_seconds();
    if (may_draft(now)) {
      run_drafts(lk);
      continue;
    }
    if (running_ || drafting_ || drafts_.empty()) {
      cv_.wait(lk);
    } else {
      const double left = std::max(drafts_.front()->arrived, last_pass_end_) + wait_s() - now;
      cv_.wait_for(lk, std::chrono::duration<double>(std::max(left, 1e-5)));
    }
  }
  if (p.error) {
    forget(&slot);  // its block will not come
    std::rethrow_exception(p.error);
  }
}

void StepBatcher::run_drafts(std::unique_lock<std::mutex>& lk) {
  drafting_ = true;
  // One drafter per pass (a server has one); jobs for another wait for the next.
  std::vector<PendingDraft*> members, rest;
  for (PendingDraft* p : drafts_) (p->drafter == drafts_.front()->drafter ? members : rest).push_back(p);
  drafts_.swap(rest);
  for (Declared& d : declared_)
    for (const PendingDraft* m : members)
      if (m->slot == d.slot) d.drafted = true;
  lk.unlock();
  std::vector<DraftJob*> jobs;
  std::vector<PendingDraft*> running;
  for (PendingDraft* m : members) {
    const DraftJob& j = *m->job;
    const int need = j.state->length() + std::max(0, j.context_n) + j.B;
    if (need > j.state->capacity()) {
      m->error = std::make_exception_ptr(Error("draft context full: " + std::to_string(need) +
                                               " positions exceed its size " + std::to_string(j.state->capacity())));
      continue;
    }
    jobs.push_back(m->job);
    running.push_back(m);
  }
  std::exception_ptr error;
  double t0 = 0, t1 = 0;
  if (!jobs.empty()) try {
      std::lock_guard<std::mutex> c(compute_mu_);
      t0 = now_seconds();
      members.front()->drafter->draft_batch(jobs);
      t1 = now_seconds();
    } catch (...) {
      error = std::current_exception();
    }
  lk.lock();
  last_compute_end_ = now_seconds();
  for (PendingDraft* m : running) m->error = error;
  for (PendingDraft* m : members) m->done = true;
  if (!jobs.empty()) {
    ++stats_.draft_passes;
    stats_.draft_jobs += jobs.size();
    stats_.draft_pass_s += t1 - t0;
    if (!error) {
      int rows = 0, context = 0;
      double block_s = 0, context_s = 0;
      for (const DraftJob* j : jobs) {
        rows += j->B - 1;
        block_s += j->block_s;
        context += std::max(0, j->context_n);
        context_s += j->context_s;
      }
      pricing_.record_draft_pass(rows, block_s);
      pricing_.record_context(context, context_s);
    }
  }
  drafting_ = false;
  cv_.notify_all();
}

double StepBatcher::wait_from() const {
  return std::max({pending_.front()->arrived, last_pass_end_, last_compute_end_});
}

void StepBatcher::compute(const std::function<void()>& f) {
  {
    std::lock_guard<std::mutex> lk(mu_);
    ++in_compute_;
  }
  struct Done {
    StepBatcher* b;
    ~Done() {
      std::lock_guard<std::mutex> lk(b->mu_);
      --b->in_compute_;
      b->last_compute_end_ = now_seconds();
      b->cv_.notify_all();
    }
  } done{this};
  std::lock_guard<std::mutex> c(compute_mu_);
  f();
}

void StepBatcher::forward(SequenceState& state, const ForwardArgs& rows) {
  Pending p;
  p.rows = SequenceRows{&state, rows};
  std::unique_lock<std::mutex> lk(mu_);
  p.arrived = now_seconds();
  pending_.push_back(&p);
  cv_.notify_all();
  while (!p.done) {
    const double now = now_seconds();
    if (may_run(now)) {
      run_pass(lk);
      continue;
    }
    if (running_ || in_compute_ > 0 || drafts_waiting() || pending_.empty()) {
      cv_.wait(lk);
    } else {
      const double left = wait_from() + wait_s() - now;
      cv_.wait_for(lk, std::chrono::duration<double>(std::max(left, 1e-5)));
    }
  }
  if (p.error) std::rethrow_exception(p.error);
}

void StepBatcher::run_pass(std::unique_lock<std::mutex>& lk) {
  running_ = true;
  std::vector<Pending*> members;
  members.swap(pending_);
  // A member's declared block is in this pass: it is one of the latest pass's blocks now.
  std::vector<std::pair<const SequenceState*, int>> blocks;
  for (const Pending* m : members) {
    for (const Declared& d : declared_)
      if (d.slot == m->rows.state && d.B == m->rows.rows.n) blocks.emplace_back(d.slot, d.B - 1);
    forget(m->rows.state);
  }
  lk.unlock();
  // A member whose rows cannot go through (its context full, a token outside the vocabulary)
  // gets its own error and stays out, so that it does not fail the pass of the others: the
  // model checks the whole batch before any state changes and would refuse all of it.
  std::vector<SequenceRows> batch;
  std::vector<Pending*> running;
  batch.reserve(members.size());
  int rows = 0;
  const int vocab = model_.config().vocab;
  for (Pending* m : members) {
    const ForwardArgs& a = m->rows.rows;
    std::string why;
    if (m->rows.state->length() + a.n > m->rows.state->capacity())
      why = "context full: " + std::to_string(m->rows.state->length() + a.n) + " tokens exceed the context size " +
            std::to_string(m->rows.state->capacity());
    for (int i = 0; i < a.n && why.empty(); ++i)
      if (a.tokens[i] < 0 || a.tokens[i] >= vocab)
        why = "token id " + std::to_string(a.tokens[i]) + " is outside the vocabulary (size " + std::to_string(vocab) + ")";
    if (!why.empty()) {
      m->error = std::make_exception_ptr(Error(why));
      continue;
    }
    batch.push_back(m->rows);
    running.push_back(m);
    rows += a.n;
  }
  std::exception_ptr error;
  double t0 = 0, t1 = 0;
  if (!batch.empty()) try {
      std::lock_guard<std::mutex> c(compute_mu_);
      t0 = now_seconds();
      model_.forward_batch(batch);
      t1 = now_seconds();
    } catch (...) {
      error = std::current_exception();
    }
  lk.lock();
  stats_.pass_s += t1 - t0;
  pass_ema_s_ = pass_ema_s_ > 0 ? pass_ema_s_ + 0.2 * ((t1 - t0) - pass_ema_s_) : t1 - t0;
  last_pass_end_ = now_seconds();
  for (Pending* m : running) m->error = error;
  for (Pending* m : members) m->done = true;
  ++stats_.passes;
  stats_.rows += uint64_t(rows);
  stats_.sequences += running.size();
  stats_.last_sequences = int(running.size());
  stats_.last_rows = rows;
  last_blocks_.swap(blocks);
  if (!batch.empty() && !error) pricing_.record_pass(rows, t1 - t0, last_pass_end_);
  running_ = false;
  cv_.notify_all();
}

}  // namespace dflash
