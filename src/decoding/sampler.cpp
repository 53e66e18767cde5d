#include "decoding/sampler.h"

#include "decoding/token_constraint.h"

#include <algorithm>
#include <cmath>
#include <numeric>

namespace dflash {

static uint64_t splitmix64(uint64_t x) {
  x += 0x9e3779b97f4a7c15ull;
  x = (x ^ (x >> 30)) * 0xbf58476d1ce4e5b9ull;
  x = (x ^ (x >> 27)) * 0x94d049bb133111ebull;
  return x ^ (x >> 31);
}

double counter_uniform(uint64_t seed, uint64_t index) {
  const uint64_t r = splitmix64(splitmix64(seed) ^ (index * 0xd1b54a32d192ed03ull));
  return double(r >> 11) * 0x1.0p-53;
}

// Two passes: the maximum over 16 independent lanes (vectorizable; the one-pass loop's
// compare against x[best] is a serial dependency, 13x slower over a 151,936-entry vocabulary,
// and a verify of B rows runs it 2B - 1 times per step), then the first index holding it.
// Same result as the one-pass loop: NaNs lose every comparison, and a NaN in front wins.
int32_t argmax(const float* x, int n) {
  if (n <= 0 || std::isnan(x[0])) return 0;
  constexpr int L = 16;
  float lane[L];
  for (int l = 0; l < L; ++l) lane[l] = -INFINITY;
  int i = 0;
  for (; i + L <= n; i += L)
    for (int l = 0; l < L; ++l) lane[l] = x[i + l] > lane[l] ? x[i + l] : lane[l];
  float mx = -INFINITY;
  for (int l = 0; l < L; ++l) mx = lane[l] > mx ? lane[l] : mx;
  for (; i < n; ++i) mx = x[i] > mx ? x[i] : mx;
  for (int j = 0; j < n; ++j)
    if (x[j] == mx) return j;
  return 0;  // unreachable: x[0] is a number, so the maximum is one of the values
}

// Walks the set bits only: a grammar's mask is often a handful of tokens (a "{", a key's next
// byte), and where it is dense (inside a string) this is one pass like argmax's second one.
int32_t argmax_allowed(const float* x, int n, const uint64_t* allowed) {
  if (allowed == nullptr) return argmax(x, n);
  int32_t best = -1, first = -1;
  for (int w = 0; w * 64 < n; ++w) {
    uint64_t bits = allowed[w];
    while (bits != 0) {
      const int i = w * 64 + __builtin_ctzll(bits);
      bits &= bits - 1;
      if (i >= n) break;
      if (first < 0) first = i;
      if (!std::isnan(x[i]) && (best < 0 || x[i] > x[best])) best = i;
    }
  }
  return best >= 0 ? best : std::max(first, 0);
}

void Sampler::adjusted_logits(const float* logits, int vocab, const std::vector<int32_t>& history, uint64_t index,
                              std::vector<float>& l, const uint64_t* allowed) const {
  l.assign(logits, logits + vocab);
  if (allowed != nullptr)
    for (int i = 0; i < vocab; ++i)
      if (!mask_allows(allowed, i)) l[size_t(i)] = -INFINITY;
  for (const auto& [t, b] : p_.logit_bias)
    if (t >= 0 && t < vocab) l[size_t(t)] += b;
  if (p_.repetition_penalty != 1.0f) {
    // Once per distinct token, however often it occurs (as Hugging Face's gather/scatter).
    std::vector<char> seen(size_t(vocab), 0);
    for (int32_t t : history)
      if (t >= 0 && t < vocab && !seen[size_t(t)]) {
        seen[size_t(t)] = 1;
        l[size_t(t)] = l[size_t(t)] > 0 ? l[size_t(t)] / p_.repetition_penalty : l[size_t(t)] * p_.repetition_penalty;
      }
  }
  if (p_.presence_penalty != 0.0f || p_.frequency_penalty != 0.0f) {
    const size_t n = size_t(std::min<uint64_t>(index, history.size()));
    std::vector<int32_t> out(history.end() - ptrdiff_t(n), history.end());
    std::sort(out.begin(), out.end());
    for (size_t i = 0; i < out.size();) {
      size_t j = i;
      while (j < out.size() && out[j] == out[i]) ++j;
      const int32_t t = out[i];
      if (t >= 0 && t < vocab) l[size_t(t)] -= p_.frequency_penalty * float(j - i) + p_.presence_penalty;
      i = j;
    }
  }
}

// Hugging Face's order after the adjustments: temperature, top-k, top-p, min-p.
void Sampler::probabilities(const float* logits, int vocab, const std::vector<int32_t>& history, uint64_t index,
                            std::vector<float>& p, const uint64_t* allowed) const {
  std::vector<float> l;
  adjusted_logits(logits, vocab, history, index, l, allowed);
  p.assign(size_t(vocab), 0.0f);
  if (greedy()) {
    p[size_t(argmax(l.data(), vocab))] = 1.0f;
    return;
  }
  for (auto& v : l) v /= p_.temperature;
  std::vector<int32_t> idx(static_cast<size_t>(vocab));
  std::iota(idx.begin(), idx.end(), 0);
  // Descending logit, ascending id on ties: a total order, so results are reproducible.
  auto by_logit = [&](int32_t a, int32_t b) { return l[size_t(a)] > l[size_t(b)] || (l[size_t(a)] == l[size_t(b)] && a < b); };
  size_t keep = size_t(vocab);
  if (p_.top_k > 0 && size_t(p_.top_k) < keep) keep = size_t(p_.top_k);
  std::partial_sort(idx.begin(), idx.begin() + long(keep), idx.end(), by_logit);
  idx.resize(keep);
  const float mx = l[size_t(idx[0])];
  std::vector<double> e(keep);
  double sum = 0;
  for (size_t i = 0; i < keep; ++i) sum += (e[i] = std::exp(double(l[size_t(idx[i])] - mx)));
  if (p_.top_p < 1.0f) {
    double cum = 0;
    size_t k = 0;
    while (k < keep) {
      cum += e[k] / sum;
      ++k;
      if (cum >= p_.top_p) break;
    }
    keep = std::max<size_t>(k, 1);
  }
  if (p_.min_p > 0.0f) {
    const double thr = p_.min_p * e[0];
    size_t k = 1;
    while (k < keep && e[k] >= thr) ++k;
    keep = k;
  }
  double s2 = 0;
  for (size_t i = 0; i < keep; ++i) s2 += e[i];
  for (size_t i = 0; i < keep; ++i) p[size_t(idx[i])] = float(e[i] / s2);
}

int32_t Sampler::sample(const float* logits, int vocab, const std::vector<int32_t>& history, uint64_t index,
                        const uint64_t* allowed) const {
  if (plain_argmax()) return argmax_allowed(logits, vocab, allowed);
  std::vector<float> p;
  probabilities(logits, vocab, history, index, p, allowed);
  if (greedy()) return argmax(p.data(), vocab);
  const double u = counter_uniform(p_.seed, index);
  double cum = 0;
  int32_t last = 0;
  for (int i = 0; i < vocab; ++i) {
    if (p[size_t(i)] <= 0) continue;
    cum += p[size_t(i)];
    last = i;
    if (u < cum) return i;
  }
  return last;  // rounding left u above the total
}

}  // namespace dflash
