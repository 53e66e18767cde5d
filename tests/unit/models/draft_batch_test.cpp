// Drafts of several sequences in one pass (Drafter::draft_batch, as StepBatcher::draft runs the
// slots that draft at the same step): each job's context rows, proposal and the state left
// behind are bitwise what add_context then propose / propose_tokens give that sequence alone.
// DFlash v1 (logits) and DFlash2 (tokens, greedy and sampled walks) drafts, the trained demo
// drafts and a random DFlash2 draft with a sliding window, softcap and output multiplier; bf16
// and q4 weights; blocks of different sizes and sequences at different lengths in one pass.
#include <gtest/gtest.h>

#include <cstring>
#include <random>
#include <string>

#include "models/dflash/dflash_draft.h"
#include "models/target_model.h"
#include "util/error.h"

using namespace dflash;

namespace {

const std::string kSrc = DFLASH_SOURCE_DIR;
constexpr int kSeqs = 4, kCtx = 256;

struct Proposal {
  DraftTokens tokens;
  std::vector<float> logits;
};

bool same(const Proposal& a, const Proposal& b) {
  return a.tokens.tokens == b.tokens.tokens && a.tokens.cand == b.tokens.cand && a.tokens.q == b.tokens.q &&
         a.tokens.finite == b.tokens.finite && a.logits.size() == b.logits.size() &&
         std::memcmp(a.logits.data(), b.logits.data(), a.logits.size() * sizeof(float)) == 0;
}

// Sequence i: `ctx[i]` rows of taps, a block of size B(i) from token first(i), sampled when odd.
struct Case {
  std::vector<std::vector<float>> ctx, more;  // context before round 1, before round 2
  std::vector<double> uniforms = std::vector<double>(16);
  static int B(int i, int round) { return (i + round) % 4 == 3 ? 16 : 2 << ((i + round) % 4); }
  static int32_t first(int i, int round) { return int32_t(11 + 29 * i + 7 * round); }
  static float temperature(int i) { return i % 2 ? 0.7f : 0.0f; }
};

Case make_case(int F) {
  std::mt19937 rng(3);
  std::normal_distribution<float> n(0.0f, 1.0f);
  Case c;
  for (int i = 0; i < kSeqs; ++i) {
    c.ctx.emplace_back(size_t(1 + 13 * i) * F);
    c.more.emplace_back(size_t(1 + (i * 5) % 7) * F);
    for (float& x : c.ctx.back()) x = n(rng);
    for (float& x : c.more.back()) x = n(rng);
  }
  for (size_t j = 0; j < c.uniforms.size(); ++j) c.uniforms[j] = double((j * 7919) % 1000) / 1000.0;
  return c;
}

DraftJob job_for(const DFlashDraft& d, SequenceState& s, const std::vector<float>& ctx, int i, int round,
                 const Case& c, Proposal& p) {
  DraftJob j;
  j.state = &s;
  j.context = ctx.data();
  j.context_n = int(ctx.size()) / d.feature_dim();
  j.first = Case::first(i, round);
  j.B = Case::B(i, round);
  j.temperature = Case::temperature(i);
  j.uniforms = c.uniforms.data();
  if (d.proposes_tokens()) {
    j.tokens = &p.tokens;
  } else {
    p.logits.assign(size_t(j.B - 1) * d.config().vocab, 0.0f);
    j.logits = p.logits.data();
  }
  return j;
}

void check(const std::string& target_dir, const std::string& draft_dir, WType w) {
  LoadOptions lo;
  lo.backend = make_cpu_backend(2);
  lo.weights = w;
  auto target = TargetModel::load(target_dir, lo);
  auto draft = DFlashDraft::load(draft_dir, lo, *target);
  const Case c = make_case(draft->feature_dim());
  const int F = draft->feature_dim();

  // Alone: each sequence by add_context and propose / propose_tokens, two rounds.
  std::vector<Proposal> alone(size_t(2 * kSeqs));
  std::vector<int> alone_len(kSeqs);
  for (int i = 0; i < kSeqs; ++i) {
    auto s = draft->new_state(kCtx);
    for (int round = 0; round < 2; ++round) {
      const std::vector<float>& ctx = round == 0 ? c.ctx[size_t(i)] : c.more[size_t(i)];
      draft->add_context(*s, ctx.data(), int(ctx.size()) / F);
      Proposal& p = alone[size_t(round * kSeqs + i)];
      const int B = Case::B(i, round);
      if (draft->proposes_tokens()) {
        draft->propose_tokens(*s, Case::first(i, round), B, Case::temperature(i), c.uniforms.data(), p.tokens);
      } else {
        p.logits.assign(size_t(B - 1) * draft->config().vocab, 0.0f);
        draft->propose(*s, Case::first(i, round), B, p.logits.data());
      }
    }
    alone_len[size_t(i)] = s->length();
  }

  // Together: every sequence's context and block in one draft_batch per round.
  std::vector<std::unique_ptr<SequenceState>> states;
  for (int i = 0; i < kSeqs; ++i) states.push_back(draft->new_state(kCtx));
  std::vector<Proposal> together(size_t(2 * kSeqs));
  for (int round = 0; round < 2; ++round) {
    std::vector<DraftJob> jobs;
    for (int i = 0; i < kSeqs; ++i)
      jobs.push_back(job_for(*draft, *states[size_t(i)], round == 0 ? c.ctx[size_t(i)] : c.more[size_t(i)], i, round, c,
                             together[size_t(round * kSeqs + i)]));
    std::vector<DraftJob*> ptrs;
    for (DraftJob& j : jobs) ptrs.push_back(&j);
    draft->draft_batch(ptrs);
    for (const DraftJob& j : jobs) {
      EXPECT_GE(j.context_s, 0.0);
      EXPECT_GT(j.block_s, 0.0);
    }
  }
  const std::string what = draft_dir + " " + wtype_name(w);
  for (int i = 0; i < kSeqs; ++i) {
    EXPECT_EQ(alone_len[size_t(i)], states[size_t(i)]->length()) << what << " sequence " << i;
    for (int round = 0; round < 2; ++round) {
      const Proposal& a = alone[size_t(round * kSeqs + i)];
      const Proposal& t = together[size_t(round * kSeqs + i)];
      EXPECT_TRUE(same(a, t)) << what << " sequence " << i << " round " << round;
      // A proposal that is all empty would make the comparison vacuous.
      if (draft->proposes_tokens()) {
        EXPECT_EQ(size_t(Case::B(i, round) - 1), a.tokens.tokens.size());
        EXPECT_EQ(Case::temperature(i) > 0, !a.tokens.q.empty());
      } else {
        EXPECT_FALSE(a.logits.empty());
      }
    }
  }
}

}  // namespace

TEST(DraftBatch, DemoDFlashDraftStackedEqualsAlone) {
  for (WType w : {WType::BF16, WType::Q4_0}) check(kSrc + "/models/demo/target", kSrc + "/models/demo/draft", w);
}

TEST(DraftBatch, DemoDFlash2DraftStackedEqualsAlone) {
  for (WType w : {WType::BF16, WType::Q4_0}) check(kSrc + "/models/demo/target", kSrc + "/models/demo/draft2", w);
}

TEST(DraftBatch, RandomDFlash2DraftWithWindowAndSoftcapStackedEqualsAlone) {
  for (WType w : {WType::BF16, WType::Q4_0})
    check(kSrc + "/tests/data/random_pair/target", kSrc + "/tests/data/random_pair2/draft", w);
}

TEST(DraftBatch, HybridDemoDraftStackedEqualsAlone) {
  check(kSrc + "/models/demo35/target", kSrc + "/models/demo35/draft2", WType::BF16);
}

TEST(DraftBatch, TwoBlocksOfOneSequenceInOnePassAreRefused) {
  LoadOptions lo;
  lo.backend = make_cpu_backend(1);
  auto target = TargetModel::load(kSrc + "/models/demo/target", lo);
  auto draft = DFlashDraft::load(kSrc + "/models/demo/draft2", lo, *target);
  auto s = draft->new_state(64);
  std::vector<float> ctx(size_t(draft->feature_dim()), 0.5f);
  draft->add_context(*s, ctx.data(), 1);
  DraftTokens a, b;
  DraftJob j1, j2;
  j1.state = j2.state = s.get();
  j2.context = ctx.data();
  j2.context_n = 1;  // refused before its context goes in
  j1.B = j2.B = 4;
  j1.tokens = &a;
  j2.tokens = &b;
  EXPECT_THROW(draft->draft_batch({&j1, &j2}), Error);
  EXPECT_EQ(1, s->length());
}

// The weights one context row goes through (fc over the taps, each layer's k and v
// projections), which the batch's pricing sets against the target's weight_bytes before a
// context row's price is measured (batch_pricing.h): bf16, 2 bytes per weight.
TEST(DraftBatch, ContextRowBytesAreFcAndEachLayersKeyAndValueProjections) {
  LoadOptions lo;
  lo.backend = make_cpu_backend(1);
  lo.weights = WType::BF16;
  auto target = TargetModel::load(kSrc + "/models/demo/target", lo);
  auto draft = DFlashDraft::load(kSrc + "/models/demo/draft2", lo, *target);
  const DraftConfig& c = draft->config();
  const size_t kvd = size_t(c.n_kv_heads) * size_t(c.head_dim);
  const size_t weights = size_t(draft->feature_dim()) * size_t(c.hidden) + size_t(c.n_layers) * 2 * kvd * size_t(c.hidden);
  EXPECT_EQ(2 * weights, draft->context_row_bytes());
  EXPECT_LT(draft->context_row_bytes(), target->weight_bytes());
}
