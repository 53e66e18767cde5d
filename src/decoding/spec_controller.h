#pragma once
// Chooses how many tokens to draft per step from what it measures as it goes: the per-token
// acceptance probability and the real cost of draft and verify passes. It goes down to zero
// (plain decoding) when speculation does not pay and probes now and then to come back up.
#include <map>
#include <vector>

#include "decoding/batch_pricing.h"

namespace dflash {

class SpecController {
 public:
  // max_block: the largest block (draft tokens + 1); adaptive=false always uses max_block.
  SpecController(int max_block, bool adaptive);

  // Block size for the next step: 1 means decode plainly this step. quote: the batch's price
  // when other slots are active (null or not batched(): alone). tokens_left: the most tokens
  // the request may still emit (the horizon over which a catch-up is paid back).
  int next_block(const BatchQuote* quote = nullptr, int tokens_left = 1 << 30);
  // After a speculative step of block B with `accepted` draft tokens accepted. draft_s: the
  // draft's own compute (not a wait for other slots' passes).
  // catch_up_s: feeding the draft the context of the plain steps before this block.
  void record_spec(int B, int accepted, double draft_s, double verify_s, double catch_up_s = 0);
  // After a plain step (one target forward of one row).
  void record_plain(double forward_s);
  // Beside others: the price of the probe next_block just chose, to be claimed from the
  // batch's probe account (0: no probe), and, after record_spec, what that probe came to.
  double probe_claim() const { return claim_; }
  ProbeSettlement probe_settlement() const { return settlement_; }

  double alpha() const;  // estimated probability that a draft token is accepted given the previous were
  double predicted_speedup(int B) const;
  double expected_tokens(int B) const;  // per block of B: accepted prefix + the bonus token

 private:
  double verify_cost(int B) const;  // seconds, measured or interpolated
  double draft_cost(int B) const;
  double batch_cost(int B) const;  // seconds a block adds to the batch: extra rows + draft
  double catch_up_share(int B) const;  // the share of the quote's catch-up one block of B pays
  int best_block_batched() const;
  bool could_pay_batched() const;  // a block would pay beside others if the draft were always right
  int best_block_alone() const;
  int batched_probe(int best);  // beside others: a probe, or a block the prior alone chose, if the account pays it

  int max_block_;
  bool adaptive_;
  double plain_s_ = 0;  // EMA of a plain step
  std::map<int, double> verify_s_, draft_s_;
  // Prior: half of draft tokens accepted, worth two judged tokens. At one (before 2026-12-06)
  // a first block that found nothing put alpha at 0.25 and the request on plain decoding for
  // 32+ steps: on the grown 1.7B pair's code prompts the controller ran at 1.05x where every
  // step drafting B=5 ran at 1.43x; at two it ran at 1.58x (fixed B=5: 1.54x).
  double acc_ = 1.0, tried_ = 2;
  int blocks_ = 0;              // this request's blocks: 0 while the prior is all it knows
  int plain_run_ = 0;           // consecutive plain steps, for probing (alone)
  int probe_every_ = 32;        // doubles after each probe that does not pay, up to 1024
  bool probing_ = false;
  int current_ = 0;
  bool batched_ = false;  // the latest decision was priced by the batch (quote_)
  int tokens_left_ = 1 << 30;
  BatchQuote quote_;
  double claim_ = 0;              // the latest decision's probe price (beside others)
  ProbeSettlement settlement_;    // the latest block's, when it was a claimed probe
};

}  // namespace dflash
