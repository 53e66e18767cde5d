#include "decoding/logprobs.h"

#include <algorithm>
#include <cmath>

namespace dflash {

double log_sum_exp(const float* logits, int vocab) {
  // The maximum as a float (no rounding); NaN never wins a comparison.
  float mx = -INFINITY;
  for (int i = 0; i < vocab; ++i) mx = logits[i] > mx ? logits[i] : mx;
  if (mx == -INFINITY) return -INFINITY;  // every logit -inf (or NaN): nothing to normalize
  if (mx == INFINITY) return INFINITY;
  const double m = mx;
  // One serial double sum in index order: no reassociation (the build has no -ffast-math),
  // so the result is a function of the row's bits alone.
  double sum = 0;
  for (int i = 0; i < vocab; ++i) sum += std::exp(double(logits[i]) - m);
  return m + std::log(sum);
}

namespace {
// The order of the top list: higher logprob first, lower id on ties.
bool before(const TokenProb& a, const TokenProb& b) { return a.logprob > b.logprob || (a.logprob == b.logprob && a.id < b.id); }
}  // namespace

TokenLogprobs token_logprobs(const float* logits, int vocab, int32_t chosen, int top_n) {
  const double lse = log_sum_exp(logits, vocab);
  auto logprob = [&](int32_t id) { return double(logits[id]) - lse; };
  TokenLogprobs out;
  out.chosen = {chosen, chosen >= 0 && chosen < vocab ? logprob(chosen) : -INFINITY};
  const int k = std::clamp(top_n, 0, std::min(kMaxTopLogprobs, vocab));
  if (k == 0) return out;
  // The k best seen so far, kept sorted: a new entry is compared against the worst kept one
  // first, so almost every token of a large vocabulary costs one comparison. Selecting on the
  // logprob itself (not the logit) keeps the tie rule exact even where the subtraction rounds
  // two logits to one logprob.
  std::vector<TokenProb>& top = out.top;
  top.reserve(size_t(k) + 1);
  for (int32_t i = 0; i < vocab; ++i) {
    const TokenProb c{i, logprob(i)};
    if (std::isnan(c.logprob)) continue;
    if (int(top.size()) == k && !before(c, top.back())) continue;
    top.insert(std::upper_bound(top.begin(), top.end(), c, before), c);
    if (int(top.size()) > k) top.pop_back();
  }
  return out;
}

}  // namespace dflash
