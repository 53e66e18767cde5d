// Bitwise isolation under continuous batching (decoding/step_batcher.h): 8 requests run 2 per
// slot on 4 slots at once, their passes batched together, give token for token what each gives
// alone in a fresh generator, with the same speculation stats (fixed block size, so the counts
// do not depend on timing). Dense (models/demo) and hybrid (models/demo35) targets, plain and
// with their DFlash2 drafts, greedy and seeded sampling. The batcher must really have batched:
// its passes held more than one sequence on average, and so did its draft passes.
#include <gtest/gtest.h>

#include <memory>
#include <random>
#include <string>
#include <thread>

#include "decoding/speculative.h"
#include "decoding/step_batcher.h"
#include "models/dflash/dflash_draft.h"
#include "models/target_model.h"

using namespace dflash;

namespace {

const std::string kSrc = DFLASH_SOURCE_DIR;
constexpr int kCtx = 512, kSlots = 4, kRequests = 8, kMaxTokens = 24;

struct Outcome {
  std::vector<int32_t> ids;
  long drafted = 0, accepted = 0, steps = 0;
  bool operator==(const Outcome& o) const {
    return ids == o.ids && drafted == o.drafted && accepted == o.accepted && steps == o.steps;
  }
};

Outcome run(Generator& g, const std::vector<int32_t>& prompt, const GenerateParams& gp) {
  Outcome o;
  g.start(prompt, gp);
  while (g.step(o.ids)) {
  }
  if (auto* sg = dynamic_cast<SpeculativeGenerator*>(&g)) {
    o.drafted = sg->stats().drafted;
    o.accepted = sg->stats().accepted;
    o.steps = sg->stats().steps;
  }
  return o;
}

// Prompts of different lengths (3 to ~150 tokens), so that prefill chunks, verify blocks and
// decode rows of different slots meet in the same passes.
std::vector<std::vector<int32_t>> prompts(int vocab) {
  std::mt19937 rng(7);
  std::vector<std::vector<int32_t>> out;
  for (int i = 0; i < kRequests; ++i) {
    std::vector<int32_t> p(size_t(3 + (i * 37) % 150));
    for (int32_t& t : p) t = int32_t(rng() % uint32_t(std::min(vocab, 5000)));
    out.push_back(p);
  }
  return out;
}

GenerateParams params_for(int i, const TargetModel& m) {
  GenerateParams gp;
  gp.max_tokens = kMaxTokens;
  gp.ignore_eos = true;  // every request runs its full length, so the runs overlap
  gp.stop_ids = m.config().eos_ids;
  gp.chunk_size = 512;
  if (i % 2 == 1) {
    gp.sampling.temperature = 0.8f;
    gp.sampling.seed = uint64_t(100 + i);
  }
  return gp;
}

void check_isolation(const std::string& target_dir, const std::string& draft_dir) {
  LoadOptions lo;
  lo.backend = make_cpu_backend(2);
  auto target = TargetModel::load(target_dir, lo);
  std::unique_ptr<DFlashDraft> draft;
  if (!draft_dir.empty()) draft = DFlashDraft::load(draft_dir, lo, *target);
  auto make = [&]() -> std::unique_ptr<Generator> {
    if (draft) return std::make_unique<SpeculativeGenerator>(*target, *draft, kCtx, SpecParams{4, /*adaptive=*/false});
    return std::make_unique<Generator>(*target, kCtx);
  };
  const auto ps = prompts(target->config().vocab);

  std::vector<Outcome> alone(kRequests);
  for (int i = 0; i < kRequests; ++i) {
    auto g = make();
    alone[size_t(i)] = run(*g, ps[size_t(i)], params_for(i, *target));
    ASSERT_EQ(kMaxTokens, int(alone[size_t(i)].ids.size()));
  }

  // Small prefill budget: long prompts go through in pieces beside the others' decode rows.
  StepBatcher batcher(*target, /*prefill_budget=*/16);
  std::vector<std::unique_ptr<Generator>> slots;
  for (int s = 0; s < kSlots; ++s) {
    slots.push_back(make());
    slots.back()->set_batcher(&batcher);
  }
  std::vector<Outcome> together(kRequests);
  std::vector<std::string> errors(kSlots);
  std::vector<std::thread> threads;
  for (int s = 0; s < kSlots; ++s)
    threads.emplace_back([&, s] {
      try {
        for (int i = s; i < kRequests; i += kSlots) {
          StepBatcher::Slot in_batch(&batcher);
          together[size_t(i)] = run(*slots[size_t(s)], ps[size_t(i)], params_for(i, *target));
        }
      } catch (const std::exception& e) {
        errors[size_t(s)] = e.what();
      }
    });
  for (auto& t : threads) t.join();
  for (int s = 0; s < kSlots; ++s) ASSERT_EQ("", errors[size_t(s)]) << "slot " << s;
  for (int i = 0; i < kRequests; ++i) {
    EXPECT_EQ(alone[size_t(i)].ids, together[size_t(i)].ids) << target_dir << " request " << i;
    EXPECT_TRUE(alone[size_t(i)] == together[size_t(i)]) << "stats differ, request " << i;
    if (draft) {
      EXPECT_GT(alone[size_t(i)].steps, 0) << "request " << i << " never speculated";
    }
  }
  const BatchStats b = batcher.stats();
  EXPECT_EQ(0, b.active);
  ASSERT_GT(b.passes, 0u);
  const double mean = double(b.sequences) / double(b.passes);
  std::printf("%s%s: %llu passes, %.2f sequences per pass\n", target_dir.c_str(), draft ? " + draft" : "",
              (unsigned long long)b.passes, mean);
  EXPECT_GT(mean, 1.5) << "the passes were not batched";
  if (draft) {
    // The slots that drafted at the same step shared one draft pass (StepBatcher::draft).
    ASSERT_GT(b.draft_passes, 0u);
    const double jobs = double(b.draft_jobs) / double(b.draft_passes);
    std::printf("  %llu draft passes, %.2f blocks per draft pass\n", (unsigned long long)b.draft_passes, jobs);
    EXPECT_GT(jobs, 1.5) << "the draft passes were not batched";
  } else {
    EXPECT_EQ(0u, b.draft_passes);
  }
}

}  // namespace

TEST(StepBatcher, DenseRequestsAreBitwiseIsolated) { check_isolation(kSrc + "/models/demo/target", ""); }
TEST(StepBatcher, DenseSpeculativeRequestsAreBitwiseIsolated) {
  check_isolation(kSrc + "/models/demo/target", kSrc + "/models/demo/draft2");
}
TEST(StepBatcher, HybridRequestsAreBitwiseIsolated) { check_isolation(kSrc + "/models/demo35/target", ""); }
TEST(StepBatcher, HybridSpeculativeRequestsAreBitwiseIsolated) {
  check_isolation(kSrc + "/models/demo35/target", kSrc + "/models/demo35/draft2");
}

// Rows that cannot go fail alone: a bad token, a full context; the others' pass runs, and the
// batcher stays usable.
TEST(StepBatcher, RowsThatCannotGoFailAloneAndTheOthersRun) {
  LoadOptions lo;
  lo.backend = make_cpu_backend(2);
  auto target = TargetModel::load(kSrc + "/models/demo/target", lo);
  StepBatcher batcher(*target);
  auto state = target->new_state(kCtx);
  const int32_t bad = target->config().vocab + 5;
  ForwardArgs a;
  a.tokens = &bad;
  a.n = 1;
  std::vector<float> logits(size_t(target->config().vocab));
  a.logits = logits.data();
  EXPECT_THROW(batcher.forward(*state, a), std::exception);
  EXPECT_EQ(0, state->length());
  const int32_t good = 1;
  a.tokens = &good;
  batcher.forward(*state, a);
  EXPECT_EQ(1, state->length());

  // Two slots in one pass: one whose context is full, one fine.
  auto full = target->new_state(1);
  std::vector<float> logits2(logits.size());
  std::string full_error;
  std::thread other([&] {
    StepBatcher::Slot in_batch(&batcher);
    ForwardArgs b = a;
    b.n = 2;
    const int32_t two[2] = {1, 2};
    b.tokens = two;
    b.logits = logits2.data();
    b.logits_from = 1;
    try {
      batcher.forward(*full, b);
    } catch (const std::exception& e) {
      full_error = e.what();
    }
  });
  {
    StepBatcher::Slot in_batch(&batcher);
    batcher.forward(*state, a);
  }
  other.join();
  EXPECT_EQ(2, state->length()) << "the good sequence's pass ran";
  EXPECT_NE(std::string::npos, full_error.find("context full")) << full_error;
  EXPECT_EQ(0, full->length());
}

namespace {
// Two slots a and b of the demo target in one batcher, for the tests of decide(): pass(na, nb)
// runs na rows of a and nb of b in one pass (it runs once both wait).
struct TwoSlots {
  static LoadOptions cpu() {
    LoadOptions lo;
    lo.backend = make_cpu_backend(2);
    return lo;
  }
  std::unique_ptr<TargetModel> target = TargetModel::load(kSrc + "/models/demo/target", cpu());
  StepBatcher batcher{*target};
  std::unique_ptr<SequenceState> a = target->new_state(kCtx), b = target->new_state(kCtx);
  StepBatcher::Slot in_a{&batcher}, in_b{&batcher};
  const std::vector<int32_t> tokens = std::vector<int32_t>(8, 1);
  std::vector<float> logits_a = std::vector<float>(size_t(target->config().vocab)), logits_b = logits_a;
  void rows_of(SequenceState& s, int n, std::vector<float>& logits) {
    ForwardArgs f;
    f.tokens = tokens.data();
    f.n = n;
    f.logits = logits.data();
    batcher.add_tokens(1);
    batcher.forward(s, f);
  }
  void pass(int na, int nb) {
    std::thread tb([&] { rows_of(*b, nb, logits_b); });
    rows_of(*a, na, logits_a);
    tb.join();
  }
};
}  // namespace

// Slots that decide at the same step see each other's blocks (StepBatcher::decide): a slot is
// priced beside the blocks declared before it for the next pass, and a block that went
// through the latest pass counts as its slot's plain row again unless that slot declares
// another. (Priced beside the latest pass as it was, four slots of a weak draft all chose
// blocks of 8 at one step, and slots beside blocks drafted at every other step only.)
TEST(StepBatcher, SlotsDecidingAtOneStepArePricedBesideEachOthersBlocks) {
  TwoSlots t;
  StepBatcher& batcher = t.batcher;
  SequenceState *a = t.a.get(), *b = t.b.get();
  auto pass = [&](int na, int nb) { t.pass(na, nb); };
  for (int i = 0; i < 3; ++i) pass(1, 1);  // measured passes: a goodput, a price
  ASSERT_EQ(3u, batcher.stats().passes) << "both slots' rows went in one pass each time";
  struct Seen {
    int rows = -1;
    bool joining = false;
  };
  auto decide = [&](SequenceState& s, int my_rows, int B) {
    Seen seen;
    EXPECT_EQ(B, batcher.decide(s, my_rows, 7, 0, 0, -1, [&](const BatchQuote* q) {
      EXPECT_NE(nullptr, q) << "two slots with a measured goodput: priced by the batch";
      if (q) seen = Seen{q->rows, q->joining};
      return B;
    }));
    return seen;
  };
  EXPECT_EQ(2, decide(*b, 1, 1).rows) << "b's row beside a's";
  const Seen first = decide(*a, 1, 8);
  EXPECT_EQ(2, first.rows) << "a declares a block of 8, priced beside b's plain row";
  EXPECT_FALSE(first.joining);
  const Seen second = decide(*b, 1, 1);
  EXPECT_EQ(9, second.rows) << "b, deciding after a at the same step, is priced beside a's block";
  EXPECT_TRUE(second.joining) << "a's block waits for its draft pass: a block of b would join it";
  pass(8, 1);  // a's block and b's row
  EXPECT_EQ(2, decide(*b, 1, 1).rows) << "a's block went through: a counts as its plain row again";
  EXPECT_EQ(2, decide(*a, 8, 4).rows);
  EXPECT_EQ(5, decide(*b, 1, 1).rows) << "until it declares another block";
}

// While nobody waits for a slot and every active slot has said how many tokens its request may
// still emit, a slot more than a block ahead of the batch's laggard is priced by the seconds
// its row adds to a pass (BatchPricing::price_ahead); the others by the batch's goodput.
TEST(StepBatcher, ASlotAheadOfTheLaggardIsPricedByWhatItsRowCosts) {
  TwoSlots t;
  StepBatcher& batcher = t.batcher;
  SequenceState *a = t.a.get(), *b = t.b.get();
  for (int i = 0; i < 3; ++i) t.pass(1, i == 0 ? 3 : 1);  // 3 rows of b once: a row's price is measured
  auto decide = [&](SequenceState& s, int left) {
    BatchQuote seen;
    batcher.decide(s, 1, 7, 0, 0, left, [&](const BatchQuote* q) {
      EXPECT_NE(nullptr, q);
      if (q) seen = *q;
      return 1;
    });
    return seen;
  };
  EXPECT_FALSE(decide(*a, 100).ahead) << "b's horizon is not known yet";
  const BatchQuote lag = decide(*b, 120);
  EXPECT_FALSE(lag.ahead) << "b, 20 tokens behind a, is the laggard";
  const BatchQuote ahead = decide(*a, 100);
  EXPECT_TRUE(ahead.ahead);
  const double row = batcher.stats().row_s;
  ASSERT_GT(row, 0.0);
  EXPECT_GE(ahead.goodput, lag.goodput) << "a's tokens are worth no more to the batch than b's";
  EXPECT_LT(ahead.goodput, 1e6 / row) << "priced (the rows either side of 2 were measured), not priceless";
  EXPECT_FALSE(decide(*a, 115).ahead) << "within a block (8) of b: priced by the goodput";
  EXPECT_FALSE(decide(*a, -1).ahead) << "no bound given: nothing known of when a ends";
  EXPECT_TRUE(decide(*a, 100).ahead);
  batcher.set_queued([] { return 1; });
  EXPECT_FALSE(decide(*a, 100).ahead) << "a request waits for a slot: a's early end frees it for that one";
}
