// presence_penalty, frequency_penalty and logit_bias: against hand-computed values and a
// straightforward reference written here, and their place in the sampler's order.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <map>
#include <random>

#include "decoding/sampler.h"

using namespace dflash;

namespace {
const std::vector<float> kLogits = {1.0f, 3.0f, 2.0f, 3.0f, -1.0f, 0.5f};

std::vector<float> adjusted(const SamplingParams& p, const std::vector<int32_t>& hist, uint64_t index,
                            const uint64_t* allowed = nullptr) {
  std::vector<float> l;
  Sampler(p).adjusted_logits(kLogits.data(), int(kLogits.size()), hist, index, l, allowed);
  return l;
}

// The documented order, one step after the other, in double: mask, bias, repetition
// penalty over the whole history, then frequency and presence over its last `index` ids.
std::vector<double> reference(const std::vector<float>& logits, const SamplingParams& p,
                              const std::vector<int32_t>& hist, size_t index) {
  std::vector<double> l(logits.begin(), logits.end());
  for (const auto& [t, b] : p.logit_bias)
    if (t >= 0 && size_t(t) < l.size()) l[size_t(t)] += b;
  std::vector<bool> seen(l.size(), false);
  for (int32_t t : hist) seen[size_t(t)] = true;
  for (size_t t = 0; t < l.size(); ++t)
    if (seen[t]) l[t] = l[t] > 0 ? l[t] / p.repetition_penalty : l[t] * p.repetition_penalty;
  std::map<int32_t, int> count;
  for (size_t i = hist.size() - std::min(index, hist.size()); i < hist.size(); ++i) ++count[hist[i]];
  for (const auto& [t, c] : count) l[size_t(t)] -= p.frequency_penalty * c + p.presence_penalty * (c > 0 ? 1 : 0);
  return l;
}
}  // namespace

TEST(SamplerPenalties, HandComputedFrequencyAndPresence) {
  SamplingParams p;
  p.frequency_penalty = 0.5f;
  p.presence_penalty = 0.25f;
  // Prompt {1, 2}, generated {3, 3, 5}: only 3 (twice) and 5 (once) are penalized.
  const std::vector<int32_t> hist = {1, 2, 3, 3, 5};
  const auto l = adjusted(p, hist, 3);
  EXPECT_EQ(1.0f, l[0]);
  EXPECT_EQ(3.0f, l[1]) << "prompt tokens are not penalized";
  EXPECT_EQ(2.0f, l[2]);
  EXPECT_EQ(3.0f - 2 * 0.5f - 0.25f, l[3]);  // 1.75
  EXPECT_EQ(-1.0f, l[4]);
  EXPECT_EQ(0.5f - 0.5f - 0.25f, l[5]);      // -0.25
  // The same ids all in the prompt: nothing changes.
  EXPECT_EQ(kLogits, adjusted(p, hist, 0));
}

TEST(SamplerPenalties, GreedyWithPenaltiesLeavesTheFastPath) {
  SamplingParams p;
  EXPECT_TRUE(Sampler(p).plain_argmax());
  p.frequency_penalty = 1.5f;
  EXPECT_FALSE(Sampler(p).plain_argmax());
  EXPECT_TRUE(Sampler(p).needs_history());
  // Id 1 (3.0) was generated once: 1.5 < 3.0 of id 3, which wins now.
  EXPECT_EQ(1, Sampler(SamplingParams{}).sample(kLogits.data(), 6, {0, 1}, 1));
  EXPECT_EQ(3, Sampler(p).sample(kLogits.data(), 6, {0, 1}, 1));
  // In the prompt only: id 1 keeps its logit.
  EXPECT_EQ(1, Sampler(p).sample(kLogits.data(), 6, {0, 1}, 0));
  SamplingParams pp;
  pp.presence_penalty = 2.0f;
  EXPECT_FALSE(Sampler(pp).plain_argmax());
  EXPECT_EQ(3, Sampler(pp).sample(kLogits.data(), 6, {1}, 1));
  SamplingParams b;
  b.logit_bias = {{2, 1.5f}};
  EXPECT_FALSE(Sampler(b).plain_argmax());
  EXPECT_FALSE(Sampler(b).needs_history()) << "a bias does not look at the tokens before";
  EXPECT_EQ(2, Sampler(b).sample(kLogits.data(), 6, {}, 0));  // 2.0 + 1.5 = 3.5
}

TEST(SamplerPenalties, NegativePenaltiesRaiseRepeatedTokens) {
  SamplingParams p;
  p.frequency_penalty = -1.5f;
  p.presence_penalty = -0.5f;
  const auto l = adjusted(p, {4, 4, 4}, 3);
  EXPECT_EQ(-1.0f + 4.5f + 0.5f, l[4]);  // 4.0, above id 1's 3.0
  EXPECT_EQ(4, Sampler(p).sample(kLogits.data(), 6, {4, 4, 4}, 3));
}

TEST(SamplerPenalties, LogitBiasBansAndForces) {
  SamplingParams ban;
  ban.logit_bias = {{1, -100.0f}, {3, -100.0f}};
  EXPECT_EQ(2, Sampler(ban).sample(kLogits.data(), 6, {}, 0));
  SamplingParams force;
  force.logit_bias = {{4, 100.0f}};
  force.temperature = 1.0f;
  for (uint64_t i = 0; i < 50; ++i) EXPECT_EQ(4, Sampler(force).sample(kLogits.data(), 6, {}, i));
  // Ids outside the vocabulary are ignored by the sampler (the server refuses them).
  SamplingParams out;
  out.logit_bias = {{-1, 50.0f}, {6, 50.0f}, {1000, 50.0f}};
  EXPECT_EQ(kLogits, adjusted(out, {}, 0));
}

TEST(SamplerPenalties, MaskComesFirstAndBiasCannotUndoIt) {
  SamplingParams p;
  p.logit_bias = {{0, 100.0f}};
  p.presence_penalty = -2.0f;
  const uint64_t bits = 0b111110;  // id 0 masked
  const auto l = adjusted(p, {0, 0}, 2, &bits);
  EXPECT_TRUE(std::isinf(l[0]) && l[0] < 0);
  EXPECT_EQ(1, Sampler(p).sample(kLogits.data(), 6, {0, 0}, 2, &bits));
  std::vector<float> pr;
  p.temperature = 1.0f;
  Sampler(p).probabilities(kLogits.data(), 6, {0, 0}, 2, pr, &bits);
  EXPECT_EQ(0.0f, pr[0]);
}

TEST(SamplerPenalties, BiasComesBeforeTheRepetitionPenalty) {
  SamplingParams p;
  p.logit_bias = {{1, -4.0f}};
  p.repetition_penalty = 2.0f;
  // Bias first: 3 - 4 = -1, then * 2 = -2 (the other order would give 1.5 - 4 = -2.5).
  EXPECT_EQ(-2.0f, adjusted(p, {1}, 0)[1]);
  // Repetition penalty before frequency: 3 / 2 = 1.5, then - 1 = 0.5 (the other order: 1).
  SamplingParams q;
  q.repetition_penalty = 2.0f;
  q.frequency_penalty = 1.0f;
  EXPECT_EQ(0.5f, adjusted(q, {1}, 1)[1]);
}

TEST(SamplerPenalties, RepetitionPenaltyOncePerDistinctToken) {
  SamplingParams p;
  p.repetition_penalty = 2.0f;
  const auto l = adjusted(p, {1, 1, 1, 4, 4}, 0);
  EXPECT_EQ(1.5f, l[1]) << "3 / 2 once, as Hugging Face's gather/scatter, not 3 / 2^3";
  EXPECT_EQ(-2.0f, l[4]);
}

TEST(SamplerPenalties, MatchReferenceOnRandomCases) {
  std::mt19937 rng(42);
  std::uniform_real_distribution<float> logit(-8.0f, 8.0f), pen(-2.0f, 2.0f), bias(-100.0f, 100.0f);
  for (int c = 0; c < 200; ++c) {
    const int vocab = 5 + int(rng() % 60);
    std::vector<float> x(static_cast<size_t>(vocab));
    for (auto& v : x) v = logit(rng);
    std::vector<int32_t> hist(rng() % 40);
    for (auto& t : hist) t = int32_t(rng() % uint32_t(std::min(vocab, 12)));  // repeats likely
    const size_t index = rng() % (hist.size() + 1);
    SamplingParams p;
    p.frequency_penalty = pen(rng);
    p.presence_penalty = pen(rng);
    p.repetition_penalty = c % 3 == 0 ? 1.0f : 0.5f + float(rng() % 100) / 50.0f;
    for (int k = int(rng() % 4); k > 0; --k) p.logit_bias.push_back({int32_t(rng() % uint32_t(vocab)), bias(rng)});
    std::sort(p.logit_bias.begin(), p.logit_bias.end());
    p.logit_bias.erase(std::unique(p.logit_bias.begin(), p.logit_bias.end(),
                                   [](auto& a, auto& b) { return a.first == b.first; }),
                       p.logit_bias.end());
    const std::vector<double> want = reference(x, p, hist, index);
    std::vector<float> got;
    Sampler(p).adjusted_logits(x.data(), vocab, hist, index, got);
    for (int t = 0; t < vocab; ++t) ASSERT_NEAR(want[size_t(t)], got[size_t(t)], 1e-3) << "case " << c << " t=" << t;
    // Greedy takes the reference's argmax (ties within rounding excluded).
    const int32_t g = Sampler(p).sample(x.data(), vocab, hist, index);
    const double best = *std::max_element(want.begin(), want.end());
    EXPECT_NEAR(best, want[size_t(g)], 1e-3) << "case " << c;
    // At temperature 1 with no filter the distribution is the reference's softmax.
    p.temperature = 1.0f;
    std::vector<float> pr;
    Sampler(p).probabilities(x.data(), vocab, hist, index, pr);
    double z = 0;
    for (double v : want) z += std::exp(v - best);
    for (int t = 0; t < vocab; ++t) ASSERT_NEAR(std::exp(want[size_t(t)] - best) / z, pr[size_t(t)], 1e-4) << "case " << c;
  }
}
