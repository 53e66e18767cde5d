#pragma once
// Chooses how many tokens to draft per step from what it measures as it goes: the per-token
// acceptance probability and the real cost of draft and verify passes. It goes down to zero
// (plain decoding) when speculation does not pay and probes now and then to come back up.
#include <map>
#include <vector>

namespace dflash {

class SpecController {
 public:
  // max_block: the largest block (draft tokens + 1); adaptive=false always uses max_block.
  SpecController(int max_block, bool adaptive);

  // Block size for the next step: 1 means decode plainly this step.
  int next_block();
  // After a speculative step of block B with `accepted` draft tokens accepted.
  void record_spec(int B, int accepted, double draft_s, double verify_s);
  // After a plain step (one target forward of one row).
  void record_plain(double forward_s);

  double alpha() const;  // estimated probability that a draft token is accepted given the previous were
  double predicted_speedup(int B) const;

 private:
  double verify_cost(int B) const;  // seconds, measured or interpolated
  double draft_cost(int B) const;

  int max_block_;
  bool adaptive_;
  double plain_s_ = 0;  // EMA of a plain step
  std::map<int, double> verify_s_, draft_s_;
  double acc_ = 0.5, tried_ = 1;  // prior: half of draft tokens accepted, weak
  int plain_run_ = 0;           // consecutive plain steps, for probing
  int probe_every_ = 32;        // doubles after each probe that does not pay, up to 1024
  bool probing_ = false;
  int current_ = 0;
};

}  // namespace dflash
