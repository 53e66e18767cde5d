// Probabilistic verification against a drafter that proposes tokens with its own sparse q
// (DFlash2's selector) must leave the output distribution equal to the target's: chi-square
// on the (first, second) and (first, second, third) tokens over many seeds, with a negative
// control. Then the real selector: its sampled walk draws each row from the q it reports.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <map>
#include <random>

#include "models/dense/dense_model.h"
#include "decoding/speculative.h"
#include "models/dense/arch_spec.h"
#include "models/dflash/dflash2_draft.h"

using namespace dflash;

namespace {

constexpr int kVocab = 8;
const std::string kSrc = DFLASH_SOURCE_DIR;

// Proposes from 5 of the 8 ids with fixed scores per row (the selector's shape: q is zero
// outside its candidates, so the residual max(0, p - q) keeps the other ids' mass).
class CandidateDrafter : public Drafter {
 public:
  CandidateDrafter() {
    std::mt19937 rng(9);
    std::normal_distribution<float> nd(0.0f, 1.5f);
    for (auto& v : scores_) v = nd(rng);
  }
  int block_size() const override { return 3; }
  const std::vector<int>& target_layers() const override { return layers_; }
  int feature_dim() const override { return 64; }
  std::unique_ptr<SequenceState> new_state(int capacity) const override { return std::make_unique<KVCache>(1, 1, 2, capacity); }
  void add_context(SequenceState& state, const float*, int n) const override {
    auto& cache = static_cast<KVCache&>(state);
    cache.set_length(cache.length() + n);
  }
  void propose(SequenceState&, int32_t, int, float*) const override {
    ADD_FAILURE() << "the loop asked a token drafter for logits";
  }
  bool proposes_tokens() const override { return true; }
  void propose_tokens(SequenceState&, int32_t, int B, float temperature, const double* u,
                      DraftTokens& out) const override {
    out = DraftTokens{};
    for (int j = 0; j < B - 1; ++j) {
      const auto q = row_q(j, temperature);
      int pick = 0;
      double cum = 0;
      for (int c = 0; c < kCand; ++c) {
        cum += q[size_t(c)];
        pick = c;
        if (u[j] < cum) break;
      }
      out.tokens.push_back(cand(j, pick));
      out.cand.emplace_back();
      out.q.emplace_back();
      for (int c = 0; c < kCand; ++c) {
        out.cand.back().push_back(cand(j, c));
        out.q.back().push_back(float(q[size_t(c)]));
      }
    }
    ++calls;
  }
  static constexpr int kCand = 5;
  int32_t cand(int j, int c) const { return int32_t((c * 3 + j) % kVocab); }  // distinct per row
  std::vector<double> row_q(int j, float temperature) const {
    std::vector<double> q(kCand);
    double s = 0;
    for (int c = 0; c < kCand; ++c) s += (q[size_t(c)] = std::exp(scores_[size_t((j % 2) * kCand + c)] / temperature));
    for (auto& v : q) v /= s;
    return q;
  }
  mutable long calls = 0;

 private:
  std::vector<float> scores_ = std::vector<float>(2 * kCand);
  std::vector<int> layers_{0};
};

ModelConfig small_vocab_config() {
  ModelConfig c;
  c.arch = find_arch_by_hf_name("Qwen3ForCausalLM");
  c.architecture = c.arch->hf_name;
  c.hidden = 64, c.n_layers = 1, c.n_heads = 2, c.n_kv_heads = 1, c.head_dim = 32, c.ffn = 64, c.vocab = kVocab;
  return c;
}

std::vector<double> softmax(const float* l, int n, float temp) {
  std::vector<double> p(static_cast<size_t>(n));
  double mx = -1e30, s = 0;
  for (int i = 0; i < n; ++i) mx = std::max(mx, double(l[i]) / temp);
  for (int i = 0; i < n; ++i) s += (p[size_t(i)] = std::exp(double(l[i]) / temp - mx));
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

// Chi-square of counts against probabilities, cells with expected count < 5 pooled.
double chi2_pooled(std::map<int, long> counts, std::map<int, double> p, long n, int* dof) {
  double rest_e = 0;
  long rest_c = 0;
  for (auto it = p.begin(); it != p.end();) {
    if (it->second * double(n) < 5) {
      rest_e += it->second;
      rest_c += counts.count(it->first) ? counts[it->first] : 0;
      counts.erase(it->first);
      it = p.erase(it);
    } else {
      ++it;
    }
  }
  if (rest_e > 0) {
    p[-1] = rest_e;
    counts[-1] = rest_c;
  }
  double x = 0;
  *dof = -1;
  for (auto& [cell, pc] : p) {
    const double e = pc * double(n);
    const double o = counts.count(cell) ? double(counts[cell]) : 0;
    x += (o - e) * (o - e) / e;
    ++*dof;
  }
  return x;
}

}  // namespace

TEST(SelectorAcceptance, TokenDrafterOutputMatchesTheTarget) {
  auto model = DenseModel::random(small_vocab_config(), WType::F32, 23);
  CandidateDrafter drafter;
  const float temp = 0.3f;
  const std::vector<int32_t> prompt = {1, 2, 3};
  const long N = 6000;
  std::map<int, long> c01, c012;
  std::vector<int32_t> firsts;
  long drafted = 0, accepted = 0;
  for (long s = 0; s < N; ++s) {
    SpeculativeGenerator g(*model, drafter, 64, SpecParams{3, false, Acceptance::Probabilistic});
    GenerateParams gp;
    gp.max_tokens = 3;
    gp.sampling.temperature = temp;
    gp.sampling.seed = uint64_t(s) * 104729 + 7;
    g.start(prompt, gp);
    std::vector<int32_t> out;
    while (g.step(out)) {
    }
    ASSERT_EQ(3u, out.size());
    firsts.push_back(out[0]);
    ++c01[out[0] * kVocab + out[1]];
    ++c012[(out[0] * kVocab + out[1]) * kVocab + out[2]];
    drafted += g.stats().drafted;
    accepted += g.stats().accepted;
  }
  EXPECT_EQ(N, drafter.calls) << "one speculative step per run";
  EXPECT_GT(accepted, drafted / 10) << "the draft must be accepted sometimes, or nothing is tested";
  EXPECT_LT(accepted, drafted * 9 / 10) << "and rejected sometimes";
  std::map<int, double> e01, e012;
  const auto p0 = softmax(last_logits(*model, prompt).data(), kVocab, temp);
  for (int a = 0; a < kVocab; ++a) {
    auto ids = prompt;
    ids.push_back(a);
    const auto p1 = softmax(last_logits(*model, ids).data(), kVocab, temp);
    for (int b = 0; b < kVocab; ++b) {
      e01[a * kVocab + b] = p0[size_t(a)] * p1[size_t(b)];
      auto ids2 = ids;
      ids2.push_back(b);
      const auto p2 = softmax(last_logits(*model, ids2).data(), kVocab, temp);
      for (int c = 0; c < kVocab; ++c) e012[(a * kVocab + b) * kVocab + c] = p0[size_t(a)] * p1[size_t(b)] * p2[size_t(c)];
    }
  }
  int k1, k2;
  const double x1 = chi2_pooled(c01, e01, N, &k1), x2 = chi2_pooled(c012, e012, N, &k2);
  EXPECT_LT(chi2_z(x1, k1), 3.5) << "second token: chi2 " << x1 << " dof " << k1;
  EXPECT_LT(chi2_z(x2, k2), 3.5) << "third token: chi2 " << x2 << " dof " << k2;

  // Negative control: second tokens taken from the drafter's q instead.
  std::mt19937_64 rng(4);
  const auto q = drafter.row_q(0, temp);
  std::discrete_distribution<int> dq(q.begin(), q.end());
  std::map<int, long> cq;
  for (long s = 0; s < N; ++s) ++cq[firsts[size_t(s)] * kVocab + drafter.cand(0, dq(rng))];
  int kq;
  const double xq = chi2_pooled(cq, e01, N, &kq);
  EXPECT_GT(chi2_z(xq, kq), 3.5) << "the test cannot tell the draft from the target: chi2 " << xq;
}

TEST(SelectorAcceptance, SampledWalkDrawsFromItsQ) {
  LoadOptions lo;
  lo.weights = WType::F32;
  auto target = DenseModel::load(kSrc + "/tests/data/random_pair/target", lo);
  auto draft = DFlashDraft::load(kSrc + "/tests/data/random_pair2/draft", lo, *target);
  const auto* d2 = dynamic_cast<const DFlash2Draft*>(draft.get());
  ASSERT_NE(nullptr, d2);
  const int B = 4, H = target->config().hidden, V = target->config().vocab;
  const int k = d2->config2().selector_top_k;
  // One block's hidden states and logits, then only the walk is repeated.
  auto dc = draft->new_state(64);
  std::vector<float> feats(size_t(5) * draft->feature_dim());
  for (size_t i = 0; i < feats.size(); ++i) feats[i] = float(std::sin(double(i) * 0.37));
  draft->add_context(*dc, feats.data(), 5);
  std::vector<float> normed(size_t(B - 1) * H), logits(size_t(B - 1) * V);
  DraftTokens dt;
  const std::vector<double> u0(size_t(B - 1), 0.5);
  d2->draft_block(*dc, 7, B, 1.0f, u0.data(), normed.data(), logits.data(), dt);
  ASSERT_TRUE(dt.finite);
  ASSERT_EQ(size_t(B - 1), dt.q.size());
  // Row 0's q does not depend on the walk; each draw must come from it.
  const std::vector<int32_t> cand0 = dt.cand[0];
  const std::vector<float> q0 = dt.q[0];
  double qsum = 0;
  for (float v : q0) qsum += v;
  EXPECT_NEAR(1.0, qsum, 1e-5);
  const long N = 4000;
  std::map<int, long> counts;
  std::map<int, double> expect;
  for (int c = 0; c < k; ++c) expect[c] = q0[size_t(c)];
  std::mt19937_64 rng(17);
  std::uniform_real_distribution<double> ud(0.0, 1.0);
  for (long s = 0; s < N; ++s) {
    std::vector<double> u(size_t(B - 1));
    for (auto& v : u) v = ud(rng);
    DraftTokens o;
    d2->select(7, normed.data(), logits.data(), B - 1, 1.0f, u.data(), o);
    ASSERT_EQ(cand0, o.cand[0]);
    const auto it = std::find(cand0.begin(), cand0.end(), o.tokens[0]);
    ASSERT_NE(cand0.end(), it) << "drew a token outside the candidates";
    ++counts[int(it - cand0.begin())];
    // Later rows: the token drawn is one of that row's candidates, with q > 0.
    for (int t = 1; t < B - 1; ++t) {
      const auto jt = std::find(o.cand[size_t(t)].begin(), o.cand[size_t(t)].end(), o.tokens[size_t(t)]);
      ASSERT_NE(o.cand[size_t(t)].end(), jt);
      ASSERT_GT(o.q[size_t(t)][size_t(jt - o.cand[size_t(t)].begin())], 0.0f);
    }
  }
  int dof;
  const double x = chi2_pooled(counts, expect, N, &dof);
  EXPECT_GE(dof, 3) << "q must spread over several candidates for this to test anything";
  EXPECT_LT(chi2_z(x, dof), 3.5) << "chi2 " << x << " dof " << dof;
  // Greedy walk: deterministic, and its first token is the best-scoring candidate, which the
  // sampled walk draws most often at this temperature only if q agrees.
  DraftTokens g1, g2;
  d2->select(7, normed.data(), logits.data(), B - 1, 0.0f, nullptr, g1);
  d2->select(7, normed.data(), logits.data(), B - 1, 0.0f, nullptr, g2);
  EXPECT_EQ(g1.tokens, g2.tokens);
  const int best = int(std::max_element(q0.begin(), q0.end()) - q0.begin());
  EXPECT_EQ(cand0[size_t(best)], g1.tokens[0]);
}
