// Probabilistic acceptance (rejection sampling against the draft's distribution) must leave
// the output distribution equal to the target's. Chi-square tests on the first token and on
// the (first, second) pair over many seeds, on a model with an 8-token vocabulary; a negative
// control shows the test detects a sampler that follows the draft instead.
#include <gtest/gtest.h>

#include <cmath>
#include <map>
#include <random>

#include "models/dense/dense_model.h"
#include "decoding/speculative.h"
#include "models/dense/arch_spec.h"

using namespace dflash;

namespace {

constexpr int kVocab = 8;

ModelConfig small_vocab_config() {
  ModelConfig c;
  c.arch = find_arch_by_hf_name("Qwen3ForCausalLM");
  c.architecture = c.arch->hf_name;
  c.hidden = 64, c.n_layers = 1, c.n_heads = 2, c.n_kv_heads = 1, c.head_dim = 32, c.ffn = 64, c.vocab = kVocab;
  return c;
}

// A draft whose distribution differs from the target's: fixed random logits per block row.
class NoisyDrafter : public Drafter {
 public:
  NoisyDrafter() {
    std::mt19937 rng(5);
    std::normal_distribution<float> nd(0.0f, 1.5f);
    for (auto& v : logits_) v = nd(rng);
  }
  int block_size() const override { return 3; }
  const std::vector<int>& target_layers() const override { return layers_; }
  int feature_dim() const override { return 64; }
  std::unique_ptr<SequenceState> new_state(int capacity) const override { return std::make_unique<KVCache>(1, 1, 2, capacity); }
  void add_context(SequenceState& state, const float*, int n) const override {
    auto& cache = static_cast<KVCache&>(state);
    cache.set_length(cache.length() + n);
  }
  void propose(SequenceState&, int32_t, int B, float* logits) const override {
    for (int j = 0; j < B - 1; ++j)
      for (int v = 0; v < kVocab; ++v) logits[j * kVocab + v] = logits_[size_t((j % 2) * kVocab + v)];
  }
  std::vector<float> row(int j) const {
    return std::vector<float>(logits_.begin() + (j % 2) * kVocab, logits_.begin() + (j % 2 + 1) * kVocab);
  }

 private:
  std::vector<float> logits_ = std::vector<float>(2 * kVocab);
  std::vector<int> layers_{0};
};

std::vector<double> softmax(const float* l, float temp) {
  std::vector<double> p(kVocab);
  double mx = -1e30, s = 0;
  for (int i = 0; i < kVocab; ++i) mx = std::max(mx, double(l[i]) / temp);
  for (int i = 0; i < kVocab; ++i) s += (p[size_t(i)] = std::exp(double(l[i]) / temp - mx));
  for (auto& v : p) v /= s;
  return p;
}

std::vector<float> last_logits(const TargetModel& m, const std::vector<int32_t>& ids) {
  auto c = m.new_state(int(ids.size()));
  std::vector<float> l(kVocab);
  ForwardArgs a;
  a.tokens = ids.data();
  a.n = int(ids.size());
  a.logits = l.data();
  m.forward(*c, a);
  return l;
}

// Wilson-Hilferty: chi-square with k degrees of freedom as an approximate standard normal.
double chi2_z(double x, int k) {
  const double h = 2.0 / (9.0 * k);
  return (std::cbrt(x / k) - (1 - h)) / std::sqrt(h);
}

double chi2(const std::map<int, long>& counts, const std::map<int, double>& p, long n, int* dof) {
  double x = 0;
  *dof = -1;
  for (auto& [cell, pc] : p) {
    const double e = pc * double(n);
    const auto it = counts.find(cell);
    const double o = it == counts.end() ? 0 : double(it->second);
    x += (o - e) * (o - e) / e;
    ++*dof;
  }
  return x;
}

}  // namespace

TEST(ProbabilisticAcceptance, FirstAndSecondTokenDistributionsMatchTheTarget) {
  auto model = DenseModel::random(small_vocab_config(), WType::F32, 21);
  NoisyDrafter drafter;
  const float temp = 0.25f;
  const std::vector<int32_t> prompt = {1, 2, 3};
  // out[0] comes from prefill; out[1] and out[2] from one speculative step over
  // [out[0], d1, d2], so they are the tokens acceptance shapes. p1 = p(out[0]).
  std::map<int, double> p1;
  std::vector<int32_t> firsts;
  {
    auto p = softmax(last_logits(*model, prompt).data(), temp);
    for (int a = 0; a < kVocab; ++a) p1[a] = p[size_t(a)];
  }
  // Pool tail cells with tiny expected counts so chi-square stays valid.
  const long N = 6000;
  std::map<int, long> c1, c12;
  long drafted = 0, accepted = 0;
  for (long s = 0; s < N; ++s) {
    SpeculativeGenerator g(*model, drafter, 64, SpecParams{3, false, Acceptance::Probabilistic});
    GenerateParams gp;
    gp.max_tokens = 3;
    gp.sampling.temperature = temp;
    gp.sampling.seed = uint64_t(s) * 7919 + 1;
    g.start(prompt, gp);
    std::vector<int32_t> out;
    while (g.step(out)) {
    }
    ASSERT_EQ(3u, out.size());
    firsts.push_back(out[0]);
    ++c1[out[1] + kVocab * out[0]];
    ++c12[out[0] * kVocab * kVocab + out[1] * kVocab + out[2]];
    drafted += g.stats().drafted;
    accepted += g.stats().accepted;
  }
  EXPECT_GT(accepted, drafted / 10) << "the draft must be accepted sometimes, or nothing is tested";
  EXPECT_LT(accepted, drafted * 9 / 10) << "and rejected sometimes";
  // Expected joint distributions of (x0, x1) and (x0, x1, x2) under the target alone.
  std::map<int, double> e01, e012;
  for (int a = 0; a < kVocab; ++a) {
    auto ids = prompt;
    ids.push_back(a);
    auto q = softmax(last_logits(*model, ids).data(), temp);
    for (int b = 0; b < kVocab; ++b) {
      e01[b + kVocab * a] = p1[a] * q[size_t(b)];
      auto ids2 = ids;
      ids2.push_back(b);
      auto r = softmax(last_logits(*model, ids2).data(), temp);
      for (int c = 0; c < kVocab; ++c) e012[a * kVocab * kVocab + b * kVocab + c] = p1[a] * q[size_t(b)] * r[size_t(c)];
    }
  }
  auto pool_small = [&](std::map<int, double>& e, std::map<int, long>& c) {
    double rest_e = 0;
    long rest_c = 0;
    for (auto it = e.begin(); it != e.end();) {
      if (it->second * N < 5) {
        rest_e += it->second;
        rest_c += c.count(it->first) ? c[it->first] : 0;
        c.erase(it->first);
        it = e.erase(it);
      } else {
        ++it;
      }
    }
    if (rest_e > 0) {
      e[-1] = rest_e;
      c[-1] = rest_c;
    }
  };
  pool_small(e01, c1);
  pool_small(e012, c12);
  int k1, k2;
  const double x1 = chi2(c1, e01, N, &k1), x2 = chi2(c12, e012, N, &k2);
  EXPECT_LT(chi2_z(x1, k1), 3.5) << "second token: chi2 " << x1 << " dof " << k1;
  EXPECT_LT(chi2_z(x2, k2), 3.5) << "third token: chi2 " << x2 << " dof " << k2;

  // Negative control: tokens drawn from the draft's distribution instead of the target's
  // must be rejected by the same test, or the test has no power.
  std::map<int, long> cq;
  std::mt19937_64 rng(3);
  auto q = softmax(drafter.row(0).data(), temp);
  std::discrete_distribution<int> dq(q.begin(), q.end());
  for (long s = 0; s < N; ++s) ++cq[dq(rng) + kVocab * firsts[size_t(s)]];
  std::map<int, double> e01b;
  for (auto& [cell, v] : e01) e01b[cell] = v;
  pool_small(e01b, cq);
  int kq;
  const double xq = chi2(cq, e01b, N, &kq);
  EXPECT_GT(chi2_z(xq, kq), 3.5) << "the test cannot tell the draft from the target: chi2 " << xq << " dof " << kq;
}
