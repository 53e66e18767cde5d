// The log-softmax / top-k helper behind the API's logprobs: values against a direct
// computation, the order of the top list (ties by id), the chosen token outside the top list,
// and its determinism (same bits for the same row, whatever else is going on).
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstring>
#include <random>
#include <vector>

#include "decoding/logprobs.h"

using namespace dflash;

namespace {

// The textbook formula in long double, as an independent reference.
std::vector<long double> reference_logprobs(const std::vector<float>& x) {
  long double mx = -INFINITY;
  for (float v : x) mx = std::max(mx, (long double)v);
  long double s = 0;
  for (float v : x) s += std::exp((long double)v - mx);
  std::vector<long double> out;
  for (float v : x) out.push_back((long double)v - mx - std::log(s));
  return out;
}

}  // namespace

TEST(Logprobs, ValuesAreTheLogSoftmaxOfTheRow) {
  std::mt19937 rng(7);
  std::normal_distribution<float> nd(0.0f, 4.0f);
  std::vector<float> x(1000);
  for (auto& v : x) v = nd(rng);
  const auto ref = reference_logprobs(x);
  const TokenLogprobs r = token_logprobs(x.data(), int(x.size()), 123, 20);
  EXPECT_EQ(123, r.chosen.id);
  EXPECT_NEAR(double(ref[123]), r.chosen.logprob, 1e-12);
  ASSERT_EQ(20u, r.top.size());
  double total = 0;
  for (size_t i = 0; i < x.size(); ++i) total += std::exp(double(ref[i]));
  EXPECT_NEAR(1.0, total, 1e-12);
  for (const TokenProb& t : r.top) EXPECT_NEAR(double(ref[size_t(t.id)]), t.logprob, 1e-12) << t.id;
  // The top list is the 20 largest logits.
  std::vector<int> order(x.size());
  for (size_t i = 0; i < x.size(); ++i) order[i] = int(i);
  std::sort(order.begin(), order.end(), [&](int a, int b) { return x[size_t(a)] > x[size_t(b)]; });
  for (int i = 0; i < 20; ++i) EXPECT_EQ(order[size_t(i)], r.top[size_t(i)].id) << i;
}

TEST(Logprobs, TopListIsDescendingWithTiesByAscendingId) {
  //                   0     1     2     3     4     5     6     7
  std::vector<float> x{1.0f, 3.0f, 2.0f, 3.0f, 2.0f, 3.0f, 0.5f, 2.0f};
  const TokenLogprobs r = token_logprobs(x.data(), int(x.size()), 6, 5);
  ASSERT_EQ(5u, r.top.size());
  const int expect[5] = {1, 3, 5, 2, 4};  // the three 3.0s by id, then the first two 2.0s
  for (int i = 0; i < 5; ++i) EXPECT_EQ(expect[i], r.top[size_t(i)].id) << i;
  EXPECT_EQ(r.top[0].logprob, r.top[1].logprob);
  EXPECT_EQ(r.top[1].logprob, r.top[2].logprob);
  EXPECT_GT(r.top[2].logprob, r.top[3].logprob);
  // Exact values: three of e^3, three of e^2, e^1, e^0.5.
  const double lse = std::log(3 * std::exp(3.0) + 3 * std::exp(2.0) + std::exp(1.0) + std::exp(0.5));
  EXPECT_NEAR(3.0 - lse, r.top[0].logprob, 1e-14);
  EXPECT_NEAR(2.0 - lse, r.top[3].logprob, 1e-14);
}

TEST(Logprobs, ChosenTokenOutsideTheTopListIsStillReported) {
  std::vector<float> x{5.0f, 4.0f, 3.0f, 2.0f, 1.0f, -7.0f};
  const TokenLogprobs r = token_logprobs(x.data(), int(x.size()), 5, 2);
  EXPECT_EQ(5, r.chosen.id);
  const double lse = std::log(std::exp(5.0) + std::exp(4.0) + std::exp(3.0) + std::exp(2.0) + std::exp(1.0) + std::exp(-7.0));
  EXPECT_NEAR(-7.0 - lse, r.chosen.logprob, 1e-13);
  ASSERT_EQ(2u, r.top.size());
  EXPECT_EQ(0, r.top[0].id);
  EXPECT_EQ(1, r.top[1].id);
  for (const TokenProb& t : r.top) EXPECT_NE(5, t.id);
}

TEST(Logprobs, ZeroAlternativesAndClampedCounts) {
  std::vector<float> x{0.0f, 1.0f, 2.0f};
  EXPECT_TRUE(token_logprobs(x.data(), 3, 1, 0).top.empty());
  const TokenLogprobs r = token_logprobs(x.data(), 3, 1, 20);  // more than the vocabulary
  ASSERT_EQ(3u, r.top.size());
  EXPECT_EQ(2, r.top[0].id);
  EXPECT_EQ(0, r.top[2].id);
  EXPECT_EQ(r.top[1].logprob, r.chosen.logprob) << "the same token's value, computed once each";
}

TEST(Logprobs, NegativeInfinityLogitsGiveNegativeInfinity) {
  std::vector<float> x{-INFINITY, 0.0f, 0.0f};
  const TokenLogprobs r = token_logprobs(x.data(), 3, 0, 3);
  EXPECT_EQ(-INFINITY, r.chosen.logprob);
  EXPECT_NEAR(std::log(0.5), r.top[0].logprob, 1e-15);
  EXPECT_EQ(-INFINITY, r.top[2].logprob);
  EXPECT_EQ(0, r.top[2].id);
}

TEST(Logprobs, SameRowGivesTheSameBits) {
  // What exactness under speculation rests on: the result is a function of the row's bits,
  // here also for a copy of the row at another address.
  std::mt19937 rng(11);
  std::normal_distribution<float> nd(0.0f, 8.0f);
  std::vector<float> x(50000);
  for (auto& v : x) v = nd(rng);
  const std::vector<float> copy = x;
  const TokenLogprobs a = token_logprobs(x.data(), int(x.size()), 42, 20);
  const TokenLogprobs b = token_logprobs(copy.data(), int(copy.size()), 42, 20);
  EXPECT_EQ(0, std::memcmp(&a.chosen.logprob, &b.chosen.logprob, sizeof(double)));
  ASSERT_EQ(a.top.size(), b.top.size());
  for (size_t i = 0; i < a.top.size(); ++i) {
    EXPECT_EQ(a.top[i].id, b.top[i].id);
    EXPECT_EQ(0, std::memcmp(&a.top[i].logprob, &b.top[i].logprob, sizeof(double)));
  }
}
