// The sampler's filters against hand-computed distributions, and its counter-based seed.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <random>

#include "decoding/sampler.h"

using namespace dflash;

namespace {
const std::vector<float> kLogits = {1.0f, 3.0f, 2.0f, 3.0f, -1.0f, 0.5f};  // ids 1 and 3 tie

std::vector<float> probs(SamplingParams p, const std::vector<int32_t>& hist = {}) {
  std::vector<float> out;
  Sampler(p).probabilities(kLogits.data(), int(kLogits.size()), hist, 0, out);
  return out;
}
}  // namespace

TEST(Sampler, GreedyPicksLowestIdOnTies) {
  EXPECT_EQ(1, Sampler(SamplingParams{}).sample(kLogits.data(), 6, {}, 0));
}

TEST(Sampler, ArgmaxIsTheFirstIndexOfTheLargestFiniteOrNot) {
  // Against the one-pass definition (first index whose value no later one exceeds) on sizes
  // around the 16-lane pass, with ties, -inf, +inf and NaNs, including a NaN in front.
  auto naive = [](const std::vector<float>& x) {
    int32_t best = 0;
    for (size_t i = 1; i < x.size(); ++i)
      if (x[i] > x[size_t(best)]) best = int32_t(i);
    return best;
  };
  std::mt19937 rng(5);
  std::uniform_int_distribution<int> small(-3, 3), kind(0, 19);
  for (int n : {1, 2, 15, 16, 17, 31, 33, 100, 4032}) {
    for (int trial = 0; trial < 50; ++trial) {
      std::vector<float> x(static_cast<size_t>(n));
      for (auto& v : x) {
        const int k = kind(rng);
        v = k == 0 ? NAN : k == 1 ? -INFINITY : k == 2 && trial % 7 == 0 ? INFINITY : float(small(rng));
      }
      if (trial % 5 == 0) x[0] = NAN;
      if (trial % 11 == 0) std::fill(x.begin(), x.end(), -INFINITY);
      ASSERT_EQ(argmax(x.data(), n), naive(x)) << "n=" << n << " trial " << trial;
    }
  }
}

TEST(Sampler, TemperatureSoftmax) {
  SamplingParams p;
  p.temperature = 2.0f;
  auto pr = probs(p);
  double z = 0;
  for (float l : kLogits) z += std::exp(l / 2.0);
  for (size_t i = 0; i < kLogits.size(); ++i) EXPECT_NEAR(std::exp(kLogits[i] / 2.0) / z, pr[i], 1e-6);
}

TEST(Sampler, TopKKeepsTheKLargest) {
  SamplingParams p;
  p.temperature = 1.0f;
  p.top_k = 3;
  auto pr = probs(p);
  const double z = std::exp(3.0) * 2 + std::exp(2.0);
  EXPECT_NEAR(std::exp(3.0) / z, pr[1], 1e-6);
  EXPECT_NEAR(std::exp(3.0) / z, pr[3], 1e-6);
  EXPECT_NEAR(std::exp(2.0) / z, pr[2], 1e-6);
  EXPECT_EQ(0.0f, pr[0]);
  EXPECT_EQ(0.0f, pr[5]);
}

TEST(Sampler, TopPKeepsTheSmallestPrefixReachingP) {
  SamplingParams p;
  p.temperature = 1.0f;
  p.top_p = 0.8f;  // the two tied tokens hold 0.77, the third brings it to 0.91
  auto pr = probs(p);
  EXPECT_GT(pr[2], 0.0f);
  EXPECT_EQ(0.0f, pr[0]);
  p.top_p = 0.5f;
  pr = probs(p);
  EXPECT_GT(pr[1], 0.0f);
  EXPECT_GT(pr[3], 0.0f);
  EXPECT_EQ(0.0f, pr[2]);
}

TEST(Sampler, MinPDropsTokensBelowAFractionOfTheBest) {
  SamplingParams p;
  p.temperature = 1.0f;
  p.min_p = 0.3f;  // keeps exp(l-3) >= 0.3: logits 3, 3, 2 (0.37); drops 1 (0.135)
  auto pr = probs(p);
  EXPECT_GT(pr[2], 0.0f);
  EXPECT_EQ(0.0f, pr[0]);
}

TEST(Sampler, RepetitionPenaltyDividesPositiveAndMultipliesNegative) {
  SamplingParams p;
  p.repetition_penalty = 2.0f;  // greedy: id 1 (3.0 -> 1.5) loses to id 3
  EXPECT_EQ(3, Sampler(p).sample(kLogits.data(), 6, {1}, 0));
  p.temperature = 1.0f;
  auto pr = probs(p, {4});
  double z = 0;
  std::vector<float> l = kLogits;
  l[4] = -2.0f;
  for (float v : l) z += std::exp(v);
  EXPECT_NEAR(std::exp(-2.0) / z, pr[4], 1e-6);
}

TEST(Sampler, SameSeedAndIndexSameDraw) {
  SamplingParams p;
  p.temperature = 1.0f;
  p.seed = 42;
  Sampler s(p);
  std::vector<int32_t> a, b, c;
  for (uint64_t i = 0; i < 200; ++i) {
    a.push_back(s.sample(kLogits.data(), 6, {}, i));
    b.push_back(s.sample(kLogits.data(), 6, {}, i));
  }
  p.seed = 43;
  for (uint64_t i = 0; i < 200; ++i) c.push_back(Sampler(p).sample(kLogits.data(), 6, {}, i));
  EXPECT_EQ(a, b);
  EXPECT_NE(a, c);
  for (uint64_t i = 0; i < 1000; ++i) {
    const double u = counter_uniform(7, i);
    ASSERT_GE(u, 0.0);
    ASSERT_LT(u, 1.0);
  }
}

// A constraint's mask: the greedy pick is the largest allowed value (lowest id on ties), and
// the sampled distribution is the unmasked one's filters applied to the allowed tokens only.
TEST(Sampler, MaskedArgmaxIsTheLargestAllowedValue) {
  std::mt19937 rng(9);
  std::uniform_int_distribution<int> small(-3, 3);
  for (int n : {1, 63, 64, 65, 200, 4032}) {
    for (int trial = 0; trial < 40; ++trial) {
      std::vector<float> x(static_cast<size_t>(n));
      for (auto& v : x) v = float(small(rng));
      std::vector<uint64_t> bits(size_t(n + 63) / 64, 0);
      int32_t want = -1;
      for (int i = 0; i < n; ++i) {
        if (rng() % 4 != 0 && i != 0) continue;  // token 0 always allowed: never an empty mask
        bits[size_t(i) / 64] |= uint64_t(1) << (i % 64);
        if (want < 0 || x[size_t(i)] > x[size_t(want)]) want = i;
      }
      ASSERT_EQ(want, argmax_allowed(x.data(), n, bits.data())) << "n=" << n << " trial " << trial;
      ASSERT_EQ(want, Sampler(SamplingParams{}).sample(x.data(), n, {}, 0, bits.data()));
    }
  }
  EXPECT_EQ(argmax(kLogits.data(), 6), argmax_allowed(kLogits.data(), 6, nullptr));
}

TEST(Sampler, MaskRemovesTokensBeforeTheFilters) {
  SamplingParams sp;
  sp.temperature = 1.0f;
  sp.top_k = 2;
  const uint64_t bits = 0b100101;  // ids 0, 2, 5: the two best allowed are 2 (logit 2) and 0 (1)
  std::vector<float> p;
  Sampler(sp).probabilities(kLogits.data(), 6, {}, 0, p, &bits);
  const double e = std::exp(-1.0);  // exp(1 - 2)
  EXPECT_NEAR(1.0 / (1.0 + e), p[2], 1e-6);
  EXPECT_NEAR(e / (1.0 + e), p[0], 1e-6);
  for (int i : {1, 3, 4, 5}) EXPECT_EQ(0.0f, p[size_t(i)]) << i;
  for (uint64_t seed = 0; seed < 50; ++seed) {
    sp.seed = seed;
    const int32_t t = Sampler(sp).sample(kLogits.data(), 6, {}, seed, &bits);
    EXPECT_TRUE(t == 0 || t == 2) << t;
  }
}
