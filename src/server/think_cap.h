#pragma once
// The hard thinking budget. Generation runs in segments: the first may use at most
// min(max_tokens, cap) tokens; if it ends there with a thought still open, "</think>\n\n" is
// appended and a second segment continues from the whole sequence (the KV prefix is reused,
// so the restart costs what one decode step costs) with whatever max_tokens leaves. A thought
// that closes by itself before the cap costs nothing but that restart.
#include <cstdint>
#include <vector>

#include "tokenizer/tokenizer.h"

namespace dflash::server {

class ThinkCap {
 public:
  // cap <= 0 or active=false: one segment of max_tokens.
  ThinkCap(int cap, int max_tokens, bool active) : cap_(cap), max_(max_tokens), armed_(active && cap > 0) {}

  // Tokens the next segment may generate, given `used` so far (forced ones included).
  int budget(int used) const;
  // A segment that generated its whole budget ended at the cap (not at max_tokens).
  bool ended_at_cap(int used) const { return armed_ && used >= cap_ && used < max_; }
  void disarm() { armed_ = false; }

 private:
  int cap_, max_;
  bool armed_;
};

// "</think>\n\n" as this tokenizer spells it.
std::vector<int32_t> think_close_tokens(const Tokenizer& tok);

}  // namespace dflash::server
