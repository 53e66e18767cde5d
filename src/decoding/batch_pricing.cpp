#include "decoding/batch_pricing.h"

#include <algorithm>
#include <iterator>

#include "decoding/cost_ema.h"

namespace dflash {

namespace {
constexpr size_t kGoodputPasses = 16;  // the goodput is measured over this many recent passes
// Before two row counts are known, a row is taken to cost this share of a known pass per row
// of it: rows are priced neither free (which would draft blindly) nor at a whole pass each.
constexpr double kPriorRowShare = 0.15;
constexpr int kContextRowsMeasured = 16;
// A count's weight for the reference (the most measured count) halves in about 70 passes.
constexpr double kWeightDecay = 0.99;
// The most the probe account holds: a few probes' prices (at 8 streams a probe with a long
// catch-up costs the batch 10-20 tokens), so that hours of drafting that paid do not fund a
// burst of probes once the text changes.
constexpr double kProbeCreditCap = 64;
constexpr int kProbeBackoff = 5;  // the account earns kProbeBudget / 2^5 at the least
constexpr int kProbeSettlePasses = 8;  // a probe not settled within this many passes is let go
// The goodput that prices a slot's tokens where its row costs the pass nothing measurable: no
// block can pay, no probe is lent.
constexpr double kPricelessGoodput = 1e12;
}  // namespace

void BatchPricing::record_pass(int rows, double seconds, double end_time) {
  if (rows <= 0 || seconds <= 0) return;
  // The most measured count (by passes, recent ones weighing more) moves the level, its shape
  // fixed; any other count's pass moves its shape, read at the level now. Moving both from
  // every pass split the drift between the level and the common count's shape, and a rare
  // count stayed priced at half of it.
  for (auto& [count, w] : pass_weight_) w *= kWeightDecay;
  const double weight = pass_weight_[rows] += 1;
  auto [it, fresh] = pass_shape_.emplace(rows, seconds / level_);  // counts: at most slots x prefill budget
  if (!fresh && rows == reference_) level_ += kCostEma * (seconds / it->second - level_);
  else if (!fresh) it->second += kCostEma * (seconds / level_ - it->second);
  if (reference_ == 0 || weight > pass_weight_[reference_]) reference_ = rows;
  const uint64_t tokens = tokens_.load(std::memory_order_relaxed);
  const uint64_t emitted = tokens - std::min(tokens, prompt_rows_.load(std::memory_order_relaxed));
  credit_ = std::min(kProbeCreditCap,
                     credit_ + kProbeBudget / double(1 << failed_probes_) * double(emitted - std::min(emitted, credited_)));
  credited_ = std::max(credited_, emitted);
  if (open_probe_passes_ > 0) --open_probe_passes_;
  marks_.push_back(Mark{end_time, tokens});
  while (marks_.size() > kGoodputPasses + 1) marks_.pop_front();
}

double BatchPricing::goodput() const {
  if (marks_.size() < 2) return 0;
  const double dt = marks_.back().time - marks_.front().time;
  return dt > 0 ? double(marks_.back().tokens - marks_.front().tokens) / dt : 0;
}

namespace {
// Seconds by row count from an EMA per count: exact; between two counts halfway between the
// straight line joining them and the roofline they imply (flat at the lower count's seconds
// while reading the weights dominates, then in proportion to the rows at the higher count's
// seconds per row): a pass's seconds grow flat and then linearly, with the knee somewhere
// between, so the line prices rows past the lower count too high and the roofline, past the
// knee, too low. Below the smallest no dearer than it; beyond the largest along the slope from
// the smallest count to it (the widest span, so the noise of two neighbouring counts does not
// steer it), or the prior. The line alone priced a verify block beside 4 decode rows at a
// prefill chunk's seconds per row, 3 rows more at 23 ms on a 75 ms pass (the grown Qwen3.5-4B
// pair, where one stream's verify of 4 rows costs 1.04x its single row), so no slot drafted
// until a late probe. Once a count is measured its own EMA prices it.
double seconds_by_rows(const std::map<int, double>& m, int rows) {
  if (m.empty()) return 0;
  auto hi = m.lower_bound(rows);
  if (hi != m.end() && hi->first == rows) return hi->second;
  if (hi == m.begin()) return hi->second;
  auto lo = std::prev(hi);
  if (hi != m.end()) {
    const double t = double(rows - lo->first) / double(hi->first - lo->first);
    const double line = lo->second + t * (hi->second - lo->second);
    const double roof = std::max(lo->second, hi->second * double(rows) / double(hi->first));
    return 0.5 * (line + std::min(line, roof));
  }
  double slope = kPriorRowShare * lo->second / double(lo->first);
  if (lo != m.begin()) {
    const auto& first = *m.begin();
    slope = std::max(0.0, (lo->second - first.second) / double(lo->first - first.first));
  }
  return lo->second + slope * double(rows - lo->first);
}
}  // namespace

double BatchPricing::pass_seconds(int rows) const { return seconds_by_rows(pass_shape_, rows) * level_; }
double BatchPricing::draft_pass_seconds(int rows) const { return seconds_by_rows(draft_pass_s_, rows); }

void BatchPricing::record_draft_pass(int rows, double seconds) {
  if (rows > 0 && seconds > 0) ema_by_key(draft_pass_s_, rows, seconds);
}

void BatchPricing::record_block(int B, int accepted, int judged, double draft_s) {
  accepted_ = accepted_ * 0.95 + accepted;
  judged_ = judged_ * 0.95 + judged;
  if (draft_s > 0) ema_by_key(draft_s_, B, draft_s);
}

void BatchPricing::claim_probe(double tokens) {
  credit_ -= tokens;
  open_probe_passes_ = kProbeSettlePasses;
}

void BatchPricing::settle_probe(const ProbeSettlement& s) {
  if (s.claimed <= 0) return;
  open_probe_passes_ = 0;
  // What it really cost, not what it was priced at (cost: the tokens it lost the batch, its
  // accepted tokens already taken off), whether or not a block like it pays: until 2026-12-07
  // a probe judged to pay on its updated estimate (3 of 3 accepted once) got its whole price
  // back though it had lost tokens, and the account lent the next at once.
  credit_ += s.claimed - s.cost;
  failed_probes_ = s.paid ? 0 : std::min(kProbeBackoff, failed_probes_ + 1);
}

void BatchPricing::record_context(int rows, double seconds) {
  // Only catch-ups long enough to be bound by their rows, not by reading the weights once.
  if (rows < kContextRowsMeasured || seconds <= 0) return;
  const double per_row = seconds / rows;
  context_row_s_ = context_row_s_ > 0 ? context_row_s_ + kCostEma * (per_row - context_row_s_) : per_row;
}

void BatchPricing::price_ahead(BatchQuote& q) const {
  if (!q.batched() || q.rows < 2) return;
  // The row's seconds from both sides of its count: a count below the smallest measured is
  // priced at the smallest's seconds, so the step below alone would make the first row free.
  const double row = 0.5 * (pass_seconds(q.rows + 1) - pass_seconds(q.rows - 1));
  q.goodput = row > 1e-9 ? std::max(q.goodput, 1.0 / row) : kPricelessGoodput;
  q.ahead = true;
}

BatchQuote BatchPricing::quote(int active, int others_rows, int max_extra, int draft_rows, int context_rows,
                               double context_share, int block_rows) const {
  BatchQuote q;
  q.active = active;
  q.extra_s.assign(size_t(std::max(0, max_extra)) + 1, 0.0);
  const int R = std::max(1, others_rows);
  const double base = pass_seconds(R);
  q.pass_s = base;
  q.rows = R;
  // The goodput a block must beat: the measured one, but never less than the same slots'
  // plain rows would make in passes of their own (each row a token or a prompt row read).
  q.goodput = goodput();
  const int plain = std::max(1, R - std::max(0, block_rows));
  const double plain_s = pass_seconds(plain);
  if (q.goodput > 0 && plain_s > 0) q.goodput = std::max(q.goodput, plain / plain_s);
  // A pass never gets cheaper with more rows: noise between neighbouring counts is clipped.
  double prev = 0;
  for (int e = 1; e <= max_extra; ++e) q.extra_s[size_t(e)] = prev = std::max(prev, pass_seconds(R + e) - base);
  q.accepted = accepted_;
  q.judged = judged_;
  q.probe_credit = open_probe_passes_ > 0 ? 0.0 : credit_;
  // Before any catch-up was measured, a context row is priced as a row of the widest target
  // pass measured (a prefill chunk's) times the share of weights it goes through (the draft's
  // fc and k/v projections: about 1.2% of a target row's weights on the grown 4B pair); with
  // no share given, as a whole target row, so that the first probes beside others wait rather
  // than pay an unknown price.
  double row = context_row_s_;
  if (row <= 0 && !pass_shape_.empty() && pass_shape_.rbegin()->first >= kContextRowsMeasured) {
    const int widest = pass_shape_.rbegin()->first;
    row = pass_seconds(widest) / widest * (context_share > 0 ? std::min(1.0, context_share) : 1.0);
  }
  q.context_rows = std::max(0, context_rows);
  q.catch_up_s = row * q.context_rows;
  q.draft_s.assign(size_t(max_extra) + 2, 0.0);
  q.joining = draft_rows > 0;
  if (draft_pass_s_.empty()) {  // no draft pass measured by rows yet: the slots' blocks
    for (const auto& [B, s] : draft_s_)
      if (B < int(q.draft_s.size())) q.draft_s[size_t(B)] = s;
    return q;
  }
  // Joining blocks already waiting, rows at or below the smallest count measured would come
  // out free (no slope known there): they cost the prior's share per row.
  const auto& [k0, s0] = *draft_pass_s_.begin();
  const double waiting = q.joining ? draft_pass_seconds(draft_rows) : 0.0;
  for (int B = 2; B < int(q.draft_s.size()); ++B) {
    const int rows = std::max(0, draft_rows) + B - 1;
    q.draft_s[size_t(B)] = q.joining && rows <= k0 ? (B - 1) * kPriorRowShare * s0 / k0
                                                   : std::max(0.0, draft_pass_seconds(rows) - waiting);
  }
  return q;
}

}  // namespace dflash
