#include "decoding/spec_controller.h"

#include <algorithm>
#include <cmath>

#include "decoding/cost_ema.h"

namespace dflash {

namespace {
constexpr int kProbeFirst = 32, kProbeMax = 1024;  // plain steps between probes when off
// The batch's evidence that informs a slot's first block: draft tokens judged (decayed) by
// the batch's blocks. With less, a block the prior alone chose beside others is a probe. At 4
// (a block or two) the weak grown 1.7B pair's 4 streams drafted 161-171 tokens in two rounds of
// six at 0.92x-0.96x of plain (`dflash bench --concurrency 1,2,4,8 --rounds 6`); we take it
// (not traced) that the fresh slots drafted on the word of a probe or two that found the draft
// right.
constexpr double kInformedJudged = 16;
// A catch-up (the draft's context for the prompt and the plain steps so far) is paid once and
// serves every block after it, so beside others a block pays a share of it: its expected
// tokens over the tokens the request may still emit, up to this many (a later block that does
// not pay on its own is not drafted, so the investment must come back within a horizon).
// Charged whole to one block, a code prompt's catch-up kept a draft accepting 57% (2.13x
// alone) off at 2, 4 and 8 streams on the grown Qwen3.5-4B pair.
constexpr int kCatchUpHorizon = 256;
}  // namespace

SpecController::SpecController(int max_block, bool adaptive) : max_block_(std::max(1, max_block)), adaptive_(adaptive) {}

// Beside other slots, what the batch's blocks measured counts as a few observations more: a
// slot that has drafted little is priced by the others' acceptance, not by the prior alone.
constexpr double kBatchEvidence = 4;

double SpecController::alpha() const {
  double acc = acc_, tried = tried_;
  if (batched_ && quote_.judged > 0) {
    acc += kBatchEvidence * quote_.accepted / quote_.judged;
    tried += kBatchEvidence;
  }
  return std::clamp(acc / tried, 0.0, 0.999);
}

// Cost at k from measured points: exact, linear between neighbours, and beyond the largest
// along the slope of the last two (costs grow with k; a single point is taken as flat).
static double interpolate(const std::map<int, double>& m, int k) {
  if (m.empty()) return -1;
  auto hi = m.lower_bound(k);
  if (hi != m.end() && hi->first == k) return hi->second;
  if (hi == m.begin()) return hi->second;
  auto lo = std::prev(hi);
  if (hi != m.end()) {
    const double t = double(k - lo->first) / double(hi->first - lo->first);
    return lo->second + t * (hi->second - lo->second);
  }
  if (lo == m.begin()) return lo->second;
  auto lo2 = std::prev(lo);
  const double slope = std::max(0.0, (lo->second - lo2->second) / double(lo->first - lo2->first));
  return lo->second + slope * double(k - lo->first);
}

double SpecController::verify_cost(int B) const {
  double v = interpolate(verify_s_, B);
  if (v < 0) v = plain_s_ > 0 ? plain_s_ * (1.0 + 0.15 * (B - 1)) : 1.0;
  return v;
}

double SpecController::draft_cost(int B) const {
  // Beside others the batch's price (a block joining others' in their draft pass pays only its
  // rows), else measured here at B, else interpolated here.
  if (batched_ && B < int(quote_.draft_s.size()) && quote_.draft_s[size_t(B)] > 0) return quote_.draft_s[size_t(B)];
  if (auto it = draft_s_.find(B); it != draft_s_.end()) return it->second;
  double v = interpolate(draft_s_, B);
  if (v < 0) v = plain_s_ > 0 ? plain_s_ * 0.2 : batched_ && quote_.pass_s > 0 ? quote_.pass_s * 0.2 : 0.1;
  return v;
}

double SpecController::batch_cost(int B) const {
  const auto& x = quote_.extra_s;
  const double rows = x.empty() ? 0.0 : x[size_t(std::min<int>(B - 1, int(x.size()) - 1))];
  return rows + draft_cost(B);
}

double SpecController::catch_up_share(int B) const {
  const double horizon = std::min(tokens_left_, kCatchUpHorizon);
  return quote_.catch_up_s * std::min(1.0, expected_tokens(B) / std::max(1.0, horizon));
}

double SpecController::expected_tokens(int B) const {
  const double a = alpha();
  // Accepted prefix (geometric in alpha, capped at B-1) + bonus.
  return (1.0 - std::pow(a, B)) / (1.0 - a);
}

double SpecController::predicted_speedup(int B) const {
  if (B <= 1 || plain_s_ <= 0) return 1.0;
  return expected_tokens(B) / (draft_cost(B) + verify_cost(B)) * plain_s_;
}

static std::vector<int> candidate_blocks(int max_block) {
  std::vector<int> c;
  for (int B = 2; B < max_block; B *= 2) c.push_back(B);
  if (max_block >= 2) c.push_back(max_block);
  return c;
}

int SpecController::best_block_alone() const {
  int best = 1;
  double best_speedup = 1.0;
  for (int B : candidate_blocks(max_block_)) {
    const double s = predicted_speedup(B);
    if (s > best_speedup * 1.02) {  // a small margin: switching on must clearly pay
      best = B;
      best_speedup = s;
    }
  }
  return best;
}

// The block whose extra tokens, less what the batch makes in the seconds it adds, gain most;
// none (1) unless its extra tokens per extra second beat the goodput by the same margin.
int SpecController::best_block_batched() const {
  const double G = quote_.goodput;
  int best = 1;
  double best_net = 0;
  for (int B : candidate_blocks(max_block_)) {
    // The context the block must feed the draft first: its share (catch_up_share).
    const double gain = expected_tokens(B) - 1.0, cost = batch_cost(B) + catch_up_share(B);
    const double net = gain - G * cost;
    if (gain > G * cost * 1.02 && net > best_net) {
      best = B;
      best_net = net;
    }
  }
  return best;
}

// Whether any block could raise the batch's goodput if every draft token were accepted. Where
// none could, a probe can only lose: at 8 streams on 2 cores a row of a block costs about
// what a token of the batch does (the grown 1.7B pair: 5 ms a row past 8, 174 tok/s), and the
// slots' probes there, each with its catch-up, cost 0.5 s a 26 s run.
bool SpecController::could_pay_batched() const {
  for (int B : candidate_blocks(max_block_))
    if (B - 1.0 > quote_.goodput * (batch_cost(B) + catch_up_share(B))) return true;
  return false;
}

int SpecController::next_block(const BatchQuote* quote, int tokens_left) {
  claim_ = 0;
  if (!adaptive_) return current_ = max_block_;
  tokens_left_ = std::max(1, tokens_left);
  batched_ = quote && quote->batched();
  if (batched_) quote_ = *quote;
  if (!batched_ && plain_s_ <= 0) return current_ = 1;  // measure a plain step first
  int best = batched_ ? best_block_batched() : best_block_alone();
  probing_ = false;
  if (batched_) return current_ = batched_probe(best);
  // Re-measure now and then: acceptance may have changed. A probe that does not pay makes the
  // next one wait twice as long, so probing never costs more than a few percent.
  if (best == 1 && ++plain_run_ >= probe_every_) {
    plain_run_ = 0;
    probing_ = true;
    best = std::min(max_block_, 4);
  }
  if (best > 1) plain_run_ = 0;
  return current_ = best;
}

// Beside others a probe is paid from the batch's account (BatchPricing::claim_probe) at its
// whole price: the seconds it adds to the batch, its catch-up whole (a probe that finds
// nothing pays all of it; it feeds at most kProbeContextRows), times the goodput. A first
// block that only the prior chose (half of the draft tokens accepted, worth two) is a probe
// too, unless the batch's blocks inform it. And no probe where no block could pay even with
// every draft token accepted: at 8 streams on 2 cores a row of a block costs about a token of
// the batch (the grown 1.7B pair: 5 ms a row past 8, 174 tok/s), and the slots' probes there,
// each with its catch-up, cost 0.5 s a 26 s run.
int SpecController::batched_probe(int best) {
  const bool informed = blocks_ > 0 || quote_.judged >= kInformedJudged;
  if (best > 1 && informed) {
    plain_run_ = 0;
    return best;
  }
  // A slot's own probes stay kProbeFirst plain steps apart, whatever the account holds: what
  // it just measured stands for a while.
  if (best == 1 && (++plain_run_ < kProbeFirst || !could_pay_batched())) return 1;
  const int B = best > 1 ? best : std::min(max_block_, 4);
  const double fed = quote_.context_rows > kProbeContextRows ? double(kProbeContextRows) / quote_.context_rows : 1.0;
  const double price = quote_.goodput * (batch_cost(B) + quote_.catch_up_s * fed);
  if (price > quote_.probe_credit) return 1;
  probing_ = true;
  claim_ = price;
  plain_run_ = 0;
  return B;
}

void SpecController::record_spec(int B, int accepted, double draft_s, double verify_s, double catch_up_s) {
  // Beside other slots a verify's wall time is the whole batch's pass: the quote prices rows.
  if (!batched_) ema_by_key(verify_s_, B, verify_s);
  ema_by_key(draft_s_, B, draft_s);
  const double judged = judged_tokens(B, accepted);
  ++blocks_;
  // Decay old evidence so the estimate follows the text (code vs prose accept differently).
  acc_ = acc_ * 0.95 + accepted;
  tried_ = tried_ * 0.95 + judged;
  const double G = quote_.goodput;
  const bool pays = batched_ ? expected_tokens(B) - 1.0 > G * batch_cost(B) : predicted_speedup(B) > 1.0;
  settlement_ = ProbeSettlement{};
  if (batched_ && probing_) {
    settlement_.claimed = claim_;
    settlement_.cost = std::max(0.0, G * (batch_cost(B) + catch_up_s) - accepted);
    settlement_.paid = pays;
  }
  if (probing_ && pays) probe_every_ = kProbeFirst;
  if (!pays) {
    // A step that did not pay cost `excess` plain steps more than one plain step would have,
    // the draft's catch-up on the plain steps before it included (beside others: the tokens
    // the batch would have made in the seconds it added; every slot probes, so the batch
    // loses that many per probe interval of each); the next probe waits long enough for
    // probes to stay within kProbeBudget.
    double excess = 0;
    if (batched_) excess = G * (batch_cost(B) + catch_up_s);
    else if (plain_s_ > 0) excess = std::max(0.0, (catch_up_s + draft_s + verify_s) / plain_s_ - 1.0);
    const int spaced = int(std::min<double>(kProbeMax, std::ceil(excess / kProbeBudget)));
    probe_every_ = std::clamp(std::max(probing_ ? probe_every_ * 2 : probe_every_, spaced), kProbeFirst, kProbeMax);
  }
}

void SpecController::record_plain(double forward_s) {
  if (batched_) return;  // the wall of a batched pass is not this slot's plain step
  if (plain_s_ <= 0) plain_s_ = forward_s;
  else plain_s_ += kCostEma * (forward_s - plain_s_);
  ema_by_key(verify_s_, 1, forward_s);
}

}  // namespace dflash
