#include "decoding/speculative.h"

#include <algorithm>
#include <cmath>
#include <cstdio>

#include "decoding/cost_ema.h"
#include "decoding/sampler.h"
#include "util/error.h"
#include "util/timer.h"

namespace dflash {

namespace {
// Independent random streams for the accept test and the residual resample.
constexpr uint64_t kAcceptStream = 0x5bd1e995a1b2c3d4ull;
constexpr uint64_t kResidualStream = 0x27d4eb2f165667c5ull;
constexpr uint64_t kDraftStream = 0x9e3779b97f4a7c15ull;
// Plain steps' taps held back for the draft's next block; past these, the older half is dropped.
constexpr int kMaxPendingRows = 256;

bool all_finite(const float* x, size_t n) {
  for (size_t i = 0; i < n; ++i)
    if (!std::isfinite(x[i])) return false;
  return true;
}

int32_t draw(const std::vector<float>& p, double u) {
  double total = 0;
  for (float v : p) total += v;
  double cum = 0;
  int32_t last = 0;
  for (size_t i = 0; i < p.size(); ++i) {
    if (p[i] <= 0) continue;
    cum += p[i] / total;
    last = int32_t(i);
    if (u < cum) return int32_t(i);
  }
  return last;
}
}  // namespace

SpeculativeGenerator::SpeculativeGenerator(const TargetModel& target, const Drafter& draft, int ctx_size,
                                           SpecParams sp)
    : Generator(target, ctx_size), draft_(draft), sp_(sp), draft_state_(draft.new_state(ctx_size)),
      controller_(sp.block_size, sp.adaptive) {
  if (sp.block_size < 1) throw Error("block size must be at least 1");
  if (const size_t tb = target.weight_bytes(); tb > 0) context_share_ = double(draft.context_row_bytes()) / double(tb);
  // Room for the rows held back (a few MB), written once here so that its pages are mapped:
  // grown as the rows came (a copy at each doubling) and first touched by the plain steps (the
  // page faults of 32 KB of taps a step on the 1.7B pair), the taps' copy took a slot 100-150
  // us a step where it takes 4-8 us now, and the batch's pass waits for the last slot (8
  // streams of the grown Qwen3-1.7B pair; at 4 streams a slot was 7-9 ms late now and then,
  // past the batch's wait, and the pass ran without it).
  pending_taps_.resize(size_t(kMaxPendingRows + std::max(1, sp.block_size)) * size_t(draft.feature_dim()));
  pending_taps_.clear();
}

void SpeculativeGenerator::start(const std::vector<int32_t>& prompt, const GenerateParams& params) {
  Generator::start(prompt, params);
  // The draft's context rows (its state, then the rows still pending) mirror the target's
  // cached positions: both go back to the longest prefix both can return to. Rows the last
  // request left pending stay pending as far as that prefix reaches: the first block feeds
  // them, and a request that never drafts never pays for them.
  const int D = draft_state_->length();
  auto draft_point = [&](int n) { return n >= D ? n : draft_state_->rollback_point(n); };
  if (gap_ > 0) {
    // After a hole the target keeps its prefix: the draft keeps its rows before the hole as
    // far as that prefix reaches, and the positions past them stay a hole.
    int keep = std::min(hole_at_, state_->length());
    while (draft_point(keep) != keep) keep = draft_point(keep);
    draft_state_->rollback(keep);
    hole_at_ = keep;
    gap_ = state_->length() - keep;
    pending_n_ = 0;
  } else {
    int common = std::min(state_->length(), D + pending_n_);
    while (state_->rollback_point(common) != common || draft_point(common) != common)
      common = std::min(state_->rollback_point(common), draft_point(common));
    state_->rollback(common);
    if (common < D) draft_state_->rollback(common);
    pending_n_ = std::max(0, common - D);
    cached_tokens_ = std::min(cached_tokens_, common);
  }
  pending_taps_.resize(size_t(pending_n_) * size_t(draft_.feature_dim()));
  pending_block_n_ = 0;
  stats_ = SpecStats{};
  stats_.block_size = sp_.block_size;
  stats_.histogram.assign(size_t(sp_.block_size) + 1, 0);
  draft_on_ = sp_.block_size > 1;
  if (!draft_on_) stats_.speculation = "off";
  controller_ = SpecController(sp_.block_size, sp_.adaptive);
}

// The draft's context rows mirror the target's positions; those still pending (plain steps'
// taps not fed yet) are left out, so the draft's snapshot may be shorter, and a restored
// context is reused as far as both reach (start()).
std::unique_ptr<GeneratorSnapshot> SpeculativeGenerator::save() const {
  auto s = Generator::save();
  if (!s) return s;
  const int n = std::min(s->target->length, gap_ > 0 ? hole_at_ : draft_state_->length());
  if (n > 0) s->draft = draft_state_->snapshot(n);
  return s;
}

bool SpeculativeGenerator::restore(const GeneratorSnapshot& s) {
  if (!Generator::restore(s)) return false;
  pending_taps_.clear();
  pending_n_ = pending_block_n_ = 0;
  if (!s.draft || !draft_state_->restore(*s.draft)) draft_state_->rollback(0);
  // A draft that reached less far than the target (its rows still pending when saved, or a
  // hole) leaves a hole: the target keeps all it restored rather than read those rows again.
  hole_at_ = draft_state_->length();
  gap_ = std::max(0, state_->length() - hole_at_);
  return true;
}

void SpeculativeGenerator::fall_back(const std::string& reason) {
  if (!draft_on_) return;
  draft_on_ = false;
  stats_.speculation = "fallback:" + reason;
  std::fprintf(stderr, "dflash: speculation switched off for this request: %s\n", reason.c_str());
}

void SpeculativeGenerator::prefill_with_taps() {
  const int vocab = model_.config().vocab;
  const int F = draft_.feature_dim();
  logits_.resize(size_t(vocab));
  const double t0 = now_seconds();
  int pos = state_->length();
  // The chunk that reaches the prompt checkpoint stops there; batch invariance keeps the bits.
  const int stop = checkpoint_row();
  while (pos < n_prompt_) {
    const int n = std::min(prefill_chunk(), (pos < stop ? stop : n_prompt_) - pos);
    taps_.resize(size_t(n) * F);
    ForwardArgs a;
    a.tokens = tokens_.data() + pos;
    a.n = n;
    a.logits_from = pos + n == n_prompt_ ? n - 1 : n;
    a.logits = logits_.data();
    a.capture_layers = &draft_.target_layers();
    a.capture = taps_.data();
    run_forward(a);
    last_rows_ = n;
    if (batcher_) batcher_->add_tokens(n, /*prompt=*/true);  // prompt rows read are the batch's work too (batch_pricing.h)
    // The prompt's taps wait with the plain steps' until the first block needs them: a request
    // that never drafts (beside other slots, often) never pays for the draft's context.
    pending_taps_.insert(pending_taps_.end(), taps_.begin(), taps_.end());
    pending_n_ += n;
    if (pending_n_ >= kMaxPendingRows) flush_pending_context();
    pos += n;
    if (pos == stop && stop < n_prompt_) state_->keep_checkpoint();
  }
  timings_.prefill_s = now_seconds() - t0;
  prefilled_ = true;
}

bool SpeculativeGenerator::plain_step(std::vector<int32_t>& out) {
  if (int(tokens_.size()) > state_->capacity()) {
    finish_ = FinishReason::Length;
    return false;
  }
  const double t0 = now_seconds();
  const int n = pending_rows();
  ForwardArgs a;
  a.tokens = tokens_.data() + state_->length();
  a.n = n;
  a.logits = logits_.data();
  if (draft_on_) {  // keep the draft's context complete so speculation can resume
    taps_.resize(size_t(n) * draft_.feature_dim());
    a.capture_layers = &draft_.target_layers();
    a.capture = taps_.data();
  }
  run_forward(a);
  last_rows_ = n;
  if (draft_on_) {
    if (n == 1) controller_.record_plain(now_seconds() - t0);
    pending_taps_.insert(pending_taps_.end(), taps_.begin(), taps_.end());
    pending_n_ += n;
    if (pending_n_ >= kMaxPendingRows) drop_oldest_pending(kMaxPendingRows / 2);
    ++stats_.plain_steps;
  }
  const int32_t t =
      sampler_.sample(logits_.data(), model_.config().vocab, tokens_, uint64_t(n_generated_), allowed_now());
  return !emit(t, logits_.data(), out);
}

// A slot that has not drafted for kMaxPendingRows plain steps keeps only its latest rows for
// the draft's next block, and the draft's context gets a hole. Fed to the draft as they
// overflowed, they cost a slot that never drafted one draft context row per token: beside 7
// others on the grown 1.7B pair (2 cores) 65 ms for 256 rows, one slot after the other, which
// made speculation 0.95-0.97x of plain decoding with 17-43 tokens drafted in 8 x 512. The
// output never depends on the draft's context (speculation is lossless), only acceptance does,
// and the rows nearest the next block are kept. A prompt of 256 rows or more is still fed as
// it is read; a shorter one waits with the plain steps' rows and goes with them, oldest first.
void SpeculativeGenerator::drop_oldest_pending(int n) {
  n = std::min(n, pending_n_);
  if (n <= 0) return;
  if (gap_ == 0) hole_at_ = draft_state_->length();
  gap_ += n;
  const size_t F = size_t(draft_.feature_dim());
  std::copy(pending_taps_.begin() + ptrdiff_t(size_t(n) * F), pending_taps_.end(), pending_taps_.begin());
  pending_n_ -= n;
  pending_taps_.resize(size_t(pending_n_) * F);
  pending_block_n_ = std::max(0, pending_block_n_ - n);
}

double SpeculativeGenerator::flush_pending_context() {
  if (pending_n_ == 0) return 0;
  const double spent = run_compute([&] { draft_.add_context(*draft_state_, pending_taps_.data(), pending_n_); });
  if (batcher_) batcher_->record_context(pending_n_, spent);  // the price of a catch-up beside others
  pending_taps_.clear();
  pending_n_ = pending_block_n_ = 0;
  return spent;
}

bool SpeculativeGenerator::spec_step(int B, std::vector<int32_t>& out) {
  const int V = model_.config().vocab;
  const int F = draft_.feature_dim();
  const int start = state_->length();
  const int32_t last = tokens_.back();

  const bool probabilistic = sp_.acceptance == Acceptance::Probabilistic && !sampler_.greedy();
  const bool need_history = sampler_.needs_history() || probabilistic;
  std::vector<int32_t> block(static_cast<size_t>(B));
  block[0] = last;
  // q[j]: the draft's distribution for block[j+1], dense over the vocabulary (logit
  // drafters) or sparse over the candidates it drew from (token drafters, in dt).
  std::vector<std::vector<float>> q(probabilistic ? size_t(B - 1) : 0);
  DraftTokens dt;
  const bool token_draft = draft_.proposes_tokens();
  auto draft_uniform = [&](int j) {
    return counter_uniform(sampler_.params().seed ^ kDraftStream, uint64_t(n_generated_ + j));
  };
  draft_logits_.resize(token_draft ? 0 : size_t(B - 1) * V);  // every row is written by the draft
  std::vector<float>& dlogits = draft_logits_;
  std::vector<double> u(size_t(B - 1));
  for (int j = 1; j < B; ++j) u[size_t(j - 1)] = draft_uniform(j);
  // The draft's pass: the context rows waiting (plain steps' taps, the last block's accepted
  // rows), then this block; beside other slots that draft now, one pass for all of them.
  // Only the sampled walk has a q; target-sample acceptance takes the greedy walk, as v1
  // drafts greedily there.
  // A probe beside others feeds the draft only its newest context rows (kProbeContextRows).
  if (controller_.probe_claim() > 0 && pending_n_ - pending_block_n_ > kProbeContextRows)
    drop_oldest_pending(pending_n_ - std::max(kProbeContextRows, pending_block_n_));
  DraftJob job;
  job.state = draft_state_.get();
  job.context = pending_taps_.data();
  job.context_n = pending_n_;
  job.first = last;
  job.B = B;
  job.temperature = probabilistic ? sampler_.params().temperature : 0.0f;
  job.uniforms = u.data();
  job.tokens = token_draft ? &dt : nullptr;
  job.logits = token_draft ? nullptr : dlogits.data();
  const double t0 = now_seconds();
  if (batcher_) batcher_->draft(draft_, job, *state_);
  else draft_.draft_batch({&job});
  // The plain steps' rows are the price of those steps, not of this block: kept out of the
  // controller's per-block draft cost (its catch-up), but counted in the request's draft time.
  const double catch_up_s = pending_n_ > 0 ? job.context_s * double(pending_n_ - pending_block_n_) / pending_n_ : 0;
  const double own_s = job.context_s + job.block_s - catch_up_s;  // without waits for other slots
  pending_taps_.clear();
  pending_n_ = pending_block_n_ = 0;
  if (token_draft && dt.finite && (int(dt.tokens.size()) != B - 1 || (probabilistic && int(dt.q.size()) != B - 1)))
    throw Error("drafter returned a malformed proposal");
  const double t1 = now_seconds();
  if (token_draft ? !dt.finite : !all_finite(dlogits.data(), dlogits.size())) {
    ++stats_.nonfinite_steps;
    fall_back("nonfinite_draft_logits");
    return plain_step(out);
  }

  std::vector<int32_t> hist;
  if (need_history && !token_draft) hist = tokens_;
  // Under a constraint a copy of it walks the proposals, so the draft proposes only what the
  // target could choose (more accepted; the output does not depend on it).
  std::unique_ptr<TokenConstraint> dc;
  if (params_.constraint && !token_draft) {
    const double tc0 = now_seconds();
    dc = params_.constraint->clone();
    timings_.mask_s += now_seconds() - tc0;
  }
  for (int j = 1; j < B; ++j) {
    if (token_draft) {
      block[size_t(j)] = dt.tokens[size_t(j - 1)];
      continue;
    }
    const float* row = dlogits.data() + size_t(j - 1) * V;
    const uint64_t* allowed = dc ? timed_mask(*dc) : nullptr;
    if (probabilistic) {
      sampler_.probabilities(row, V, hist, uint64_t(n_generated_ + j - 1), q[size_t(j - 1)], allowed);
      block[size_t(j)] = draw(q[size_t(j - 1)], draft_uniform(j));
    } else {
      block[size_t(j)] = argmax_allowed(row, V, allowed);  // the reference drafts greedily at any temperature
    }
    if (dc) timed_accept(*dc, block[size_t(j)]);
    if (need_history) hist.push_back(block[size_t(j)]);
  }
  auto q_of = [&](int j, int32_t tok) -> float {
    if (!token_draft) return q[size_t(j)][size_t(tok)];
    for (size_t c = 0; c < dt.cand[size_t(j)].size(); ++c)
      if (dt.cand[size_t(j)][c] == tok) return dt.q[size_t(j)][c];
    return 0.0f;
  };
  auto subtract_q = [&](int j, std::vector<float>& p) {
    if (!token_draft) {
      for (size_t i = 0; i < p.size(); ++i) p[i] = std::max(0.0f, p[i] - q[size_t(j)][i]);
      return;
    }
    for (size_t c = 0; c < dt.cand[size_t(j)].size(); ++c) {
      float& v = p[size_t(dt.cand[size_t(j)][c])];
      v = std::max(0.0f, v - dt.q[size_t(j)][c]);
    }
  };

  verify_logits_.resize(size_t(B) * V);  // every row is written by the verify pass
  const std::vector<float>& vlogits = verify_logits_;
  taps_.resize(size_t(B) * F);
  ForwardArgs a;
  a.tokens = block.data();
  a.n = B;
  a.logits_from = 0;
  a.logits = verify_logits_.data();
  a.capture_layers = &draft_.target_layers();
  a.capture = taps_.data();
  a.rollback_rows = true;  // the rows past the accepted prefix are rolled back below
  run_forward(a);
  last_rows_ = B;
  const double t2 = now_seconds();

  // Walk the block: accept while the draft agrees with the target, then one bonus token. The
  // constraint moves with the walk, so row j is masked as plain decoding masks that position.
  TokenConstraint* cons = params_.constraint.get();
  std::vector<int32_t> emitted;
  auto take = [&](int32_t t) {
    if (cons) timed_accept(*cons, t);
    emitted.push_back(t);
  };
  int accepted = 0;
  std::vector<int32_t> h;
  if (need_history) h = tokens_;
  std::vector<float> p;
  for (int j = 0; j < B; ++j) {
    const float* row = vlogits.data() + size_t(j) * V;
    const uint64_t index = uint64_t(n_generated_ + j);
    const uint64_t* allowed = cons ? timed_mask(*cons) : nullptr;
    if (probabilistic && j < B - 1) {
      sampler_.probabilities(row, V, h, index, p, allowed);
      const int32_t d = block[size_t(j + 1)];
      const double u = counter_uniform(sampler_.params().seed ^ kAcceptStream, index);
      if (u * q_of(j, d) < p[size_t(d)]) {
        take(d);
        ++accepted;
        h.push_back(d);
        continue;
      }
      subtract_q(j, p);
      take(draw(p, counter_uniform(sampler_.params().seed ^ kResidualStream, index)));
      break;
    }
    const int32_t t = sampler_.sample(row, V, h, index, allowed);
    take(t);
    if (j < B - 1 && block[size_t(j + 1)] == t) {
      ++accepted;
      if (need_history) h.push_back(t);
      continue;
    }
    break;
  }

  // Keep the rows of the committed tokens (last + accepted drafts); their taps become the
  // draft's new context, fed with the next block's pass.
  state_->rollback(start + accepted + 1);
  pending_taps_.insert(pending_taps_.end(), taps_.begin(), taps_.begin() + ptrdiff_t(accepted + 1) * F);
  pending_n_ += accepted + 1;
  pending_block_n_ += accepted + 1;

  stats_.drafted += B - 1;
  stats_.accepted += accepted;
  ++stats_.steps;
  stats_.accept_lens.push_back(accepted);
  ++stats_.histogram[size_t(accepted + 1)];
  stats_.draft_s += t1 - t0;
  stats_.verify_s += t2 - t1;
  controller_.record_spec(B, accepted, own_s, t2 - t1, catch_up_s);
  if (batcher_) batcher_->record_block(B, accepted, judged_tokens(B, accepted), own_s, controller_.probe_settlement());

  // Emitted token j was chosen from verify row j, the target's logits at its position
  // (bitwise those of plain decoding): its logprobs come from that row.
  for (size_t j = 0; j < emitted.size(); ++j)
    if (emit(emitted[j], vlogits.data() + j * size_t(V), out, /*constraint_moved=*/true)) return false;
  return true;
}

bool SpeculativeGenerator::step(std::vector<int32_t>& out) {
  if (!may_step()) return false;
  if (!prefilled_) {
    if (draft_on_) prefill_with_taps();
    else prefill();
    const int32_t t = sampler_.sample(logits_.data(), model_.config().vocab, tokens_, 0, allowed_now());
    return !emit(t, logits_.data(), out);
  }
  if (!draft_on_) return plain_step(out);
  // Never verify more than can be emitted or stored; tokens fed plainly (forced by a
  // constraint) go as a plain step.
  const int left = params_.max_tokens - n_generated_;
  auto choose = [&](BatchQuote* quote) {
    const int b = std::min({controller_.next_block(quote, left), left, state_->capacity() - state_->length(),
                            draft_state_->capacity() - draft_state_->length() - pending_n_});
    if (quote) quote->probe_claim = controller_.probe_claim();  // the batcher takes it from the account
    return b <= 1 || pending_rows() != 1 ? 1 : b;
  };
  // Beside other slots a block is priced by what it costs the batch (batch_pricing.h), beside
  // the blocks the others chose for the same pass.
  const int horizon = params_.horizon >= 0 ? std::max(0, params_.horizon - n_generated_) : -1;
  const int B = batcher_ && sp_.adaptive ? batcher_->decide(*state_, last_rows_, sp_.block_size - 1,
                                                            pending_n_ - pending_block_n_, context_share_, horizon,
                                                            choose)
                                         : choose(nullptr);
  if (B <= 1) return plain_step(out);
  return spec_step(B, out);
}

}  // namespace dflash
