// The speculative loop against plain decoding, with scripted drafters whose proposals are
// known: all right, wrong at chosen positions, or NaN. Output must always equal plain decoding.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <chrono>
#include <cstdio>
#include <cstring>
#include <limits>
#include <memory>
#include <thread>

#include "models/dense/dense_model.h"
#include "decoding/generator.h"
#include "decoding/speculative.h"
#include "models/dense/arch_spec.h"

using namespace dflash;

namespace {

ModelConfig tiny_config() {
  ModelConfig c;
  c.arch = find_arch_by_hf_name("Qwen3ForCausalLM");
  c.architecture = c.arch->hf_name;
  c.hidden = 64, c.n_layers = 2, c.n_heads = 2, c.n_kv_heads = 1, c.head_dim = 32, c.ffn = 128, c.vocab = 96;
  return c;
}

// Proposes the tokens of a known continuation `truth` (indexed by position), except at
// positions where wrong(pos) holds; or NaN logits when nan=true.
class ScriptedDrafter : public Drafter {
 public:
  ScriptedDrafter(std::vector<int32_t> truth, int vocab, std::function<bool(int)> wrong, bool nan = false)
      : truth_(std::move(truth)), vocab_(vocab), wrong_(std::move(wrong)), nan_(nan) {}
  int block_size() const override { return 4; }
  const std::vector<int>& target_layers() const override { return layers_; }
  int feature_dim() const override { return 64; }
  std::unique_ptr<SequenceState> new_state(int capacity) const override { return std::make_unique<KVCache>(1, 1, 2, capacity); }
  void add_context(SequenceState& state, const float*, int n) const override {
    auto& cache = static_cast<KVCache&>(state);
    cache.set_length(cache.length() + n);
  }
  void propose(SequenceState& state, int32_t, int B, float* logits) const override {
    const int start = state.length();
    for (int j = 1; j < B; ++j) {
      float* row = logits + size_t(j - 1) * vocab_;
      for (int v = 0; v < vocab_; ++v) row[v] = nan_ ? std::numeric_limits<float>::quiet_NaN() : 0.0f;
      const int pos = start + j;
      int32_t t = pos < int(truth_.size()) ? truth_[size_t(pos)] : 0;
      if (wrong_(pos)) t = (t + 1) % vocab_;
      if (!nan_) row[t] = 10.0f;
    }
    ++calls;
  }
  mutable int calls = 0;

 private:
  std::vector<int32_t> truth_;
  int vocab_;
  std::function<bool(int)> wrong_;
  bool nan_;
  std::vector<int> layers_{0};
};

std::vector<int32_t> run(Generator& g, const std::vector<int32_t>& prompt, const GenerateParams& gp) {
  g.start(prompt, gp);
  std::vector<int32_t> out;
  while (g.step(out)) {
  }
  return out;
}

struct Fixture {
  std::unique_ptr<DenseModel> model = DenseModel::random(tiny_config(), WType::BF16, 3, make_cpu_backend(2));
  std::vector<int32_t> prompt{5, 17, 33, 2, 8, 61};
  std::vector<int32_t> plain(const GenerateParams& gp) {
    Generator g(*model, 256);
    return run(g, prompt, gp);
  }
  std::vector<int32_t> truth(const GenerateParams& gp) {  // prompt + plain output, by position
    auto t = prompt;
    auto p = plain(gp);
    t.insert(t.end(), p.begin(), p.end());
    return t;
  }
};

}  // namespace

TEST(Speculative, PerfectDraftAcceptsEverythingAndMatchesPlain) {
  Fixture f;
  GenerateParams gp;
  gp.max_tokens = 50;
  const auto plain = f.plain(gp);
  ScriptedDrafter d(f.truth(gp), 96, [](int) { return false; });
  for (int B : {2, 4, 8, 16}) {
    SpeculativeGenerator g(*f.model, d, 256, SpecParams{B, false});
    EXPECT_EQ(plain, run(g, f.prompt, gp)) << "B=" << B;
    const SpecStats& s = g.stats();
    ASSERT_GT(s.steps, 0);
    for (size_t i = 0; i + 1 < s.accept_lens.size(); ++i) EXPECT_EQ(B - 1, s.accept_lens[i]);
    EXPECT_EQ(s.drafted, s.accepted + 0) << "a perfect draft is never rejected";
  }
}

TEST(Speculative, WrongDraftTokensAreRejectedAndOutputStaysExact) {
  Fixture f;
  GenerateParams gp;
  gp.max_tokens = 60;
  const auto plain = f.plain(gp);
  for (int every : {2, 3, 5, 7}) {
    ScriptedDrafter d(f.truth(gp), 96, [every](int pos) { return pos % every == 0; });
    for (int B : {2, 4, 8, 16}) {
      SpeculativeGenerator g(*f.model, d, 256, SpecParams{B, false});
      EXPECT_EQ(plain, run(g, f.prompt, gp)) << "every=" << every << " B=" << B;
      // A window of B-1 drafted positions always holds a multiple of `every`.
      if (B - 1 >= every) {
        EXPECT_LT(g.stats().accepted, g.stats().drafted) << "every=" << every << " B=" << B;
      }
      if (every > 2 || B > 2) {
        EXPECT_GT(g.stats().accepted, 0);
      }
    }
  }
}

TEST(Speculative, MaxTokensHonouredExactly) {
  Fixture f;
  for (int max_tokens : {1, 2, 3, 7, 8, 9, 17}) {
    GenerateParams gp;
    gp.max_tokens = max_tokens;
    GenerateParams longer = gp;
    longer.max_tokens = 40;
    ScriptedDrafter d(f.truth(longer), 96, [](int) { return false; });
    SpeculativeGenerator g(*f.model, d, 256, SpecParams{8, false});
    const auto out = run(g, f.prompt, gp);
    EXPECT_EQ(size_t(max_tokens), out.size());
    EXPECT_EQ(f.plain(gp), out);
    EXPECT_EQ(FinishReason::Length, g.finish_reason());
  }
}

TEST(Speculative, StopTokenInsideAcceptedPrefixEndsGeneration) {
  Fixture f;
  GenerateParams gp;
  gp.max_tokens = 40;
  const auto plain = f.plain(gp);
  const int32_t stop = plain[9];  // appears at output position 9 (maybe earlier too)
  GenerateParams with_stop = gp;
  with_stop.stop_ids = {stop};
  const auto plain_stopped = f.plain(with_stop);
  ASSERT_EQ(stop, plain_stopped.back());
  ScriptedDrafter d(f.truth(gp), 96, [](int) { return false; });
  SpeculativeGenerator g(*f.model, d, 256, SpecParams{16, false});
  EXPECT_EQ(plain_stopped, run(g, f.prompt, with_stop));
  EXPECT_EQ(FinishReason::Stop, g.finish_reason());
}

TEST(Speculative, NonFiniteDraftLogitsFallBackToPlain) {
  Fixture f;
  GenerateParams gp;
  gp.max_tokens = 30;
  ScriptedDrafter d(f.truth(gp), 96, [](int) { return false; }, /*nan=*/true);
  SpeculativeGenerator g(*f.model, d, 256, SpecParams{8, false});
  EXPECT_EQ(f.plain(gp), run(g, f.prompt, gp));
  EXPECT_EQ("fallback:nonfinite_draft_logits", g.stats().speculation);
  EXPECT_EQ(1, g.stats().nonfinite_steps);
  EXPECT_EQ(1, d.calls) << "after the fallback the draft is not run again";
}

TEST(Speculative, TemperatureSamplingEqualsPlainSamplingWithSameSeed) {
  Fixture f;
  GenerateParams gp;
  gp.max_tokens = 48;
  gp.sampling.temperature = 0.9f;
  gp.sampling.top_p = 0.95f;
  gp.sampling.seed = 1234;
  const auto plain = f.plain(gp);
  GenerateParams other = gp;
  other.sampling.seed = 99;
  EXPECT_NE(plain, f.plain(other)) << "the seed must matter, or this test proves nothing";
  ScriptedDrafter d(f.truth(gp), 96, [](int pos) { return pos % 4 == 0; });
  SpeculativeGenerator g(*f.model, d, 256, SpecParams{8, false});
  EXPECT_EQ(plain, run(g, f.prompt, gp));
  EXPECT_GT(g.stats().accepted, 0);
}

TEST(Speculative, AdaptiveLoopStaysExactWithUselessAndPerfectDrafts) {
  Fixture f;
  GenerateParams gp;
  gp.max_tokens = 120;
  const auto plain = f.plain(gp);
  ScriptedDrafter useless(f.truth(gp), 96, [](int) { return true; });
  SpeculativeGenerator g1(*f.model, useless, 256, SpecParams{8, true});
  EXPECT_EQ(plain, run(g1, f.prompt, gp));
  EXPECT_EQ(0, g1.stats().accepted);
  EXPECT_GT(g1.stats().plain_steps, 0);
  ScriptedDrafter perfect(f.truth(gp), 96, [](int) { return false; });
  SpeculativeGenerator g2(*f.model, perfect, 256, SpecParams{8, true});
  EXPECT_EQ(plain, run(g2, f.prompt, gp));
  // How often the controller speculates depends on the timings it measures (a loaded machine
  // can make a verify look dear), so only what holds whatever they are: its prior makes it
  // try a block after the first plain step, and a perfect draft loses no drafted token.
  EXPECT_GT(g2.stats().steps, 0);
  EXPECT_GT(g2.stats().accepted, 0);
  EXPECT_EQ(g2.stats().accepted, g2.stats().drafted);
}

// The controller's decisions from synthetic costs: plain step 10 ms, verify of B rows
// 10 ms * (1 + 0.05 (B-1)), draft 3 ms per block.
static void feed(SpecController& c, int steps, bool accept_all) {
  for (int i = 0; i < steps; ++i) {
    const int B = c.next_block();
    if (B <= 1) c.record_plain(0.010);
    else c.record_spec(B, accept_all ? B - 1 : 0, 0.003, 0.010 * (1 + 0.05 * (B - 1)));
  }
}

TEST(SpecController, SwitchesOffWhenNothingIsAcceptedAndProbesBackOn) {
  SpecController c(8, true);
  feed(c, 40, false);
  int spec = 0;
  for (int i = 0; i < 30; ++i) {
    const int B = c.next_block();
    if (B > 1) {
      ++spec;
      c.record_spec(B, 0, 0.003, 0.0105);
    } else {
      c.record_plain(0.010);
    }
  }
  EXPECT_LE(spec, 1) << "at most one probe in 30 steps once acceptance is known to be zero";
  // The prior (half accepted, worth two blocks) is outweighed: drafting is known not to pay.
  EXPECT_LT(c.alpha(), 0.25);
  for (int B : {2, 4, 8}) EXPECT_LT(c.predicted_speedup(B), 1.0) << "B " << B;
  feed(c, 200, true);  // the text became predictable: probes find out and speculation returns
  EXPECT_EQ(8, c.next_block());
  EXPECT_GT(c.predicted_speedup(8), 3.0);
}

TEST(SpecController, ExpensiveProbesThatFindNothingStayWithinTheirBudget) {
  // Long context on a small target: a block costs 20 ms of draft and 25 ms of verify against a
  // 10 ms plain step, and nothing is ever accepted. Over a 256-token answer, probes 32, 64
  // and 128 steps apart (what the controller did before) cost 5.5%.
  SpecController c(8, true);
  double spent = 0, plain_equiv = 0;
  for (int i = 0; i < 256; ++i) {
    const int B = c.next_block();
    if (B > 1) {
      c.record_spec(B, 0, 0.020, 0.025);
      spent += 0.045;
    } else {
      c.record_plain(0.010);
      spent += 0.010;
    }
    plain_equiv += 0.010;  // each step emits one token here, as a plain step would
  }
  EXPECT_LT(spent / plain_equiv, 1.04) << "probing cost " << 100 * (spent / plain_equiv - 1) << "% of decode time";
}

TEST(SpecController, FixedBlockWhenNotAdaptive) {
  SpecController c(16, false);
  feed(c, 10, false);
  EXPECT_EQ(16, c.next_block());
}

TEST(Speculative, ForcedTokensAreFedAndOutputMatchesPlain) {
  // A think-cap style injection mid-generation: plain and speculative agree on what follows.
  Fixture f;
  GenerateParams gp;
  gp.max_tokens = 40;
  const std::vector<int32_t> forced = {7, 11, 13};
  auto run_forced = [&](Generator& g) {
    g.start(f.prompt, gp);
    std::vector<int32_t> out;
    g.step(out);  // the first token comes from prefill, one in both generators
    g.force_tokens(forced);
    out.insert(out.end(), forced.begin(), forced.end());
    while (g.step(out)) {
    }
    return out;
  };
  Generator plain(*f.model, 256);
  const auto expect = run_forced(plain);
  ASSERT_EQ(size_t(40), expect.size());
  auto truth = f.prompt;
  truth.insert(truth.end(), expect.begin(), expect.end());
  ScriptedDrafter d(truth, 96, [](int pos) { return pos % 5 == 0; });
  SpeculativeGenerator sg(*f.model, d, 256, SpecParams{4, false});
  EXPECT_EQ(expect, run_forced(sg));
  EXPECT_GT(sg.stats().accepted, 0);
}

TEST(Speculative, FollowUpRequestReusesCachedPrefix) {
  Fixture f;
  GenerateParams gp;
  gp.max_tokens = 10;
  Generator g(*f.model, 256);
  const auto first = run(g, f.prompt, gp);
  auto follow = g.tokens();  // the whole first conversation plus a new turn
  follow.push_back(3);
  follow.push_back(4);
  const auto second = run(g, follow, gp);
  EXPECT_GE(g.cached_tokens(), int(f.prompt.size()));
  Generator fresh(*f.model, 256);
  EXPECT_EQ(second, run(fresh, follow, gp)) << "a reused prefix must not change the output";
  EXPECT_EQ(0, fresh.cached_tokens());
}

// Logprobs under speculation: every emitted token's values come from the verify row of its
// position, which batch invariance makes bitwise the decode row, so they equal plain
// decoding's to the bit, whatever the block size and however many drafts were rejected.
TEST(Speculative, LogprobsAreBitwiseThoseOfPlainDecoding) {
  Fixture f;
  GenerateParams gp;
  gp.max_tokens = 40;
  gp.logprobs = 5;
  Generator plain_gen(*f.model, 256);
  const auto plain = run(plain_gen, f.prompt, gp);
  const std::vector<TokenLogprobs> want = plain_gen.logprobs();
  ASSERT_EQ(plain.size(), want.size());
  for (size_t i = 0; i < plain.size(); ++i) {
    EXPECT_EQ(plain[i], want[i].chosen.id);
    ASSERT_EQ(5u, want[i].top.size());
    EXPECT_EQ(plain[i], want[i].top[0].id) << "greedy picks the most likely token";
    EXPECT_LT(want[i].chosen.logprob, 0.0);
  }
  for (int B : {2, 4, 8}) {
    ScriptedDrafter d(f.truth(gp), 96, [](int pos) { return pos % 3 == 0; });
    SpeculativeGenerator g(*f.model, d, 256, SpecParams{B, false});
    EXPECT_EQ(plain, run(g, f.prompt, gp)) << "B=" << B;
    EXPECT_GT(g.stats().accepted, 0) << "B=" << B;
    const std::vector<TokenLogprobs>& got = g.logprobs();
    ASSERT_EQ(want.size(), got.size()) << "B=" << B;
    for (size_t i = 0; i < want.size(); ++i) {
      EXPECT_EQ(0, std::memcmp(&want[i].chosen.logprob, &got[i].chosen.logprob, sizeof(double))) << "B=" << B << " i=" << i;
      for (size_t k = 0; k < 5; ++k) {
        EXPECT_EQ(want[i].top[k].id, got[i].top[k].id);
        EXPECT_EQ(0, std::memcmp(&want[i].top[k].logprob, &got[i].top[k].logprob, sizeof(double)));
      }
    }
  }
  // Without the request for them, nothing is computed or kept.
  GenerateParams none = gp;
  none.logprobs = -1;
  Generator g(*f.model, 256);
  run(g, f.prompt, none);
  EXPECT_TRUE(g.logprobs().empty());
}

// A constraint whose allowed set moves with every token: after tokens summing to s, token t
// is allowed when (t + s) % 3 != 0, and stop ids always. Enough to make every position's
// mask different, so a verify row masked with the wrong state would show.
namespace {
class ModuloConstraint : public TokenConstraint {
 public:
  explicit ModuloConstraint(int vocab) : vocab_(vocab), bits_(size_t(vocab + 63) / 64) {}
  const uint64_t* allowed() override {
    std::fill(bits_.begin(), bits_.end(), 0);
    for (int t = 0; t < vocab_; ++t)
      if (ok(t)) bits_[size_t(t) / 64] |= uint64_t(1) << (t % 64);
    return bits_.data();
  }
  bool accept(int32_t t) override {
    if (!ok(t)) return false;
    sum_ += t;
    ++accepted;
    return true;
  }
  std::unique_ptr<TokenConstraint> clone() const override { return std::make_unique<ModuloConstraint>(*this); }
  bool ok(int32_t t) const { return (t + sum_) % 3 != 0; }
  int accepted = 0;

 private:
  int vocab_;
  long sum_ = 0;
  std::vector<uint64_t> bits_;
};

// Replays `out` through a fresh constraint: every token must have been allowed where it came.
bool all_allowed(const std::vector<int32_t>& out, int vocab) {
  ModuloConstraint c(vocab);
  for (int32_t t : out)
    if (!c.accept(t)) return false;
  return true;
}
}  // namespace

TEST(Speculative, ConstrainedOutputEqualsConstrainedPlainAtEveryBlockSize) {
  Fixture f;
  for (float temp : {0.0f, 0.9f}) {
    GenerateParams gp;
    gp.max_tokens = 60;
    gp.sampling.temperature = temp;
    gp.sampling.seed = 77;
    const auto free_out = f.plain(gp);
    gp.constraint = std::make_shared<ModuloConstraint>(96);
    const auto plain = f.plain(gp);
    ASSERT_EQ(size_t(60), plain.size());
    EXPECT_TRUE(all_allowed(plain, 96)) << "temp=" << temp;
    EXPECT_FALSE(all_allowed(free_out, 96)) << "the constraint must bite, or this test proves nothing";
    GenerateParams fresh = gp;
    fresh.constraint = std::make_shared<ModuloConstraint>(96);
    const auto truth = f.truth(fresh);
    for (int every : {1000, 3}) {
      ScriptedDrafter d(truth, 96, [every](int pos) { return pos % every == 0; });
      for (int B : {2, 4, 8, 16}) {
        gp.constraint = std::make_shared<ModuloConstraint>(96);
        SpeculativeGenerator g(*f.model, d, 256, SpecParams{B, false});
        EXPECT_EQ(plain, run(g, f.prompt, gp)) << "temp=" << temp << " every=" << every << " B=" << B;
        EXPECT_EQ(60, static_cast<ModuloConstraint&>(*gp.constraint).accepted)
            << "the request's constraint moves past each emitted token once";
        if (every == 1000) {
          EXPECT_EQ(g.stats().drafted, g.stats().accepted) << "B=" << B;
        }
      }
    }
  }
}

TEST(Speculative, ProbabilisticAcceptanceKeepsEveryTokenInsideTheConstraint) {
  Fixture f;
  GenerateParams gp;
  gp.max_tokens = 60;
  gp.sampling.temperature = 1.0f;
  gp.sampling.seed = 5;
  gp.constraint = std::make_shared<ModuloConstraint>(96);
  const auto truth = f.truth(gp);
  ScriptedDrafter d(truth, 96, [](int pos) { return pos % 4 == 0; });
  gp.constraint = std::make_shared<ModuloConstraint>(96);
  SpeculativeGenerator g(*f.model, d, 256, SpecParams{8, false, Acceptance::Probabilistic});
  const auto out = run(g, f.prompt, gp);
  EXPECT_EQ(size_t(60), out.size());
  EXPECT_TRUE(all_allowed(out, 96));
  EXPECT_GT(g.stats().accepted, 0);
}

// presence/frequency penalty, repetition penalty and logit_bias change the logits from the
// tokens before: every verify row must see the history plain decoding saw at its position.
// The draft proposes plain decoding's penalized output, wrong at every `every`-th position.
TEST(Speculative, PenalizedOutputEqualsPenalizedPlainGreedyAndSampled) {
  Fixture f;
  for (float temp : {0.0f, 0.9f}) {
    GenerateParams gp;
    gp.max_tokens = 60;
    gp.sampling.temperature = temp;
    gp.sampling.seed = 4242;
    const auto free_out = f.plain(gp);
    gp.sampling.frequency_penalty = 0.7f;
    gp.sampling.presence_penalty = 0.4f;
    gp.sampling.logit_bias = {{free_out[0], -100.0f}, {7, 1.5f}};
    const auto plain = f.plain(gp);
    ASSERT_EQ(size_t(60), plain.size());
    EXPECT_NE(free_out, plain) << "temp=" << temp << ": the penalties must bite, or this test proves nothing";
    EXPECT_EQ(std::count(plain.begin(), plain.end(), free_out[0]), 0) << "a -100 bias bans the token";
    for (float rp : {1.0f, 1.3f}) {
      gp.sampling.repetition_penalty = rp;
      const auto want = f.plain(gp);
      const auto truth = f.truth(gp);
      for (int every : {1000, 3}) {
        ScriptedDrafter d(truth, 96, [every](int pos) { return pos % every == 0; });
        for (int B : {2, 4, 8, 16}) {
          SpeculativeGenerator g(*f.model, d, 256, SpecParams{B, false});
          EXPECT_EQ(want, run(g, f.prompt, gp)) << "temp=" << temp << " rp=" << rp << " every=" << every << " B=" << B;
          EXPECT_GT(g.stats().accepted, 0);
          if (every == 1000) {
            EXPECT_EQ(g.stats().drafted, g.stats().accepted) << "B=" << B;
          }
        }
      }
    }
  }
}

// The draft proposes the unpenalized output: its repeats are rejected where the penalty
// moved the target, and the output is still plain decoding's.
TEST(Speculative, PenaltiesHoldAgainstADraftThatIgnoresThem) {
  Fixture f;
  GenerateParams gp;
  gp.max_tokens = 60;
  const auto free_truth = f.truth(gp);
  gp.sampling.frequency_penalty = 2.0f;
  const auto plain = f.plain(gp);
  ScriptedDrafter d(free_truth, 96, [](int) { return false; });
  SpeculativeGenerator g(*f.model, d, 256, SpecParams{8, false});
  EXPECT_EQ(plain, run(g, f.prompt, gp));
  EXPECT_LT(g.stats().accepted, g.stats().drafted);
}

// A request that keeps speculation off for long keeps only its latest plain steps' rows for
// the draft (kMaxPendingRows, 256): the older ones are dropped instead of fed, so the draft's
// context gets a hole. Output stays plain decoding's, and a follow-up request on the same
// slot keeps the target's whole cached prefix (the hole stays a hole).
TEST(Speculative, RowsOfALongPlainStretchAreDroppedNotFedAndTheTargetKeepsItsPrefix) {
  Fixture f;
  GenerateParams gp;
  gp.max_tokens = 700;
  Generator plain_g(*f.model, 1024);
  const auto plain = run(plain_g, f.prompt, gp);
  struct Counting : ScriptedDrafter {
    using ScriptedDrafter::ScriptedDrafter;
    void add_context(SequenceState& state, const float* x, int n) const override {
      fed += n;
      ScriptedDrafter::add_context(state, x, n);
    }
    // A draft pass far dearer than the tiny target's step: after the first block finds
    // nothing the next probe waits the longest (1024 steps), however loaded the machine.
    void propose(SequenceState& state, int32_t first, int B, float* logits) const override {
      std::this_thread::sleep_for(std::chrono::milliseconds(20));
      ScriptedDrafter::propose(state, first, B, logits);
    }
    mutable int fed = 0;
  };
  Counting useless(std::vector<int32_t>(1024, 0), 96, [](int) { return true; });
  SpeculativeGenerator g(*f.model, useless, 1024, SpecParams{8, true});
  EXPECT_EQ(plain, run(g, f.prompt, gp));
  EXPECT_EQ(0, g.stats().accepted);
  const int positions = int(f.prompt.size() + plain.size());
  // Fed: the prompt and the first block's row; the 699 plain steps after it keep only their
  // latest rows, never fed (before 2026-12-07 they were fed 256 at a time: all 706).
  const int fed = useless.fed;
  EXPECT_LT(fed, positions - 128) << "rows fed " << fed << " of " << positions;
  auto follow = g.tokens();
  follow.push_back(3);
  follow.push_back(4);
  GenerateParams gp2;
  gp2.max_tokens = 40;
  const auto second = run(g, follow, gp2);
  EXPECT_EQ(run(plain_g, follow, gp2), second);
  EXPECT_EQ(plain_g.cached_tokens(), g.cached_tokens()) << "the target's prefix is kept as plain decoding keeps it";
  EXPECT_GT(g.cached_tokens(), 700);
  Generator fresh(*f.model, 1024);
  EXPECT_EQ(run(fresh, follow, gp2), second);
  std::printf("rows fed to the draft: %d of %d positions; cached on follow-up: %d\n", fed, positions,
              g.cached_tokens());
}
