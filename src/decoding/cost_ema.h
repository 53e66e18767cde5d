#pragma once
// Measured costs kept by key (block size, row count) as exponential moving averages: the first
// measurement of a key is taken as is, later ones move it by a fifth, so a cost follows the
// machine's load without jumping on one noisy pass. SpecController and BatchPricing share it.
#include <map>

namespace dflash {

constexpr double kCostEma = 0.2;

inline void ema_by_key(std::map<int, double>& m, int key, double v) {
  auto [it, fresh] = m.emplace(key, v);
  if (!fresh) it->second += kCostEma * (v - it->second);
}

// Draft tokens of a block of B that the target judged: the accepted ones and the first
// rejected one (none rejected when all B-1 were accepted). Acceptance is accepted / judged.
inline int judged_tokens(int B, int accepted) { return accepted < B - 1 ? accepted + 1 : accepted; }

}  // namespace dflash
