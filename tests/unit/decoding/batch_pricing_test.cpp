// BatchPricing (decoding/batch_pricing.h) and the controller's batched decision
// (spec_controller.h) on a simulated batch: pass times that grow with rows, tokens per pass,
// and slots with a good or a useless draft. The price must follow the measured pass times,
// and a slot must draft beside others only where its block raises the batch's goodput.
#include <gtest/gtest.h>

#include <set>
#include <vector>

#include "decoding/batch_pricing.h"
#include "decoding/spec_controller.h"

using namespace dflash;

namespace {

// A CPU pass: flat while reading the weights dominates, then linear in rows once compute does.
double pass_time(int rows) { return 0.050 + 0.002 * std::max(0, rows - 16); }

// Records `passes` passes of `rows` rows, each emitting `tokens`.
void simulate(BatchPricing& p, double& now, int passes, int rows, int tokens) {
  for (int i = 0; i < passes; ++i) {
    p.add_tokens(tokens);
    now += pass_time(rows);
    p.record_pass(rows, pass_time(rows), now);
  }
}

// What StepBatcher::decide and record_block do around a slot's decision: a probe's price is
// taken from the batch's probe account when it is chosen and settled once it is judged.
int choose_block(SpecController& c, BatchPricing& p, const BatchQuote& q, int tokens_left = 1 << 30) {
  const int B = c.next_block(&q, tokens_left);
  if (B > 1 && c.probe_claim() > 0) p.claim_probe(c.probe_claim());
  return B;
}
void judge_block(SpecController& c, BatchPricing& p, int B, int accepted, double draft_s, double verify_s,
                 double catch_up_s = 0) {
  c.record_spec(B, accepted, draft_s, verify_s, catch_up_s);
  p.record_block(B, accepted, std::min(B - 1, accepted + 1), draft_s);
  p.settle_probe(c.probe_settlement());
}

}  // namespace

TEST(BatchPricing, GoodputIsTokensPerSecondOfTheRecentPasses) {
  BatchPricing p;
  double now = 0;
  EXPECT_EQ(0.0, p.goodput()) << "nothing measured yet";
  simulate(p, now, 20, 8, 8);
  EXPECT_NEAR(8 / 0.050, p.goodput(), 1e-6);
  simulate(p, now, 20, 8, 4);  // the batch slowed down: the goodput follows within a window
  EXPECT_NEAR(4 / 0.050, p.goodput(), 1e-6);
}

TEST(BatchPricing, PricesRowsFromMeasuredPassesAndNeverBelowZero) {
  BatchPricing p;
  double now = 0;
  simulate(p, now, 5, 8, 8);
  // One row count known: extra rows are priced by the prior (a share of the known pass), not free.
  BatchQuote q = p.quote(4, 8, 15);
  ASSERT_EQ(16u, q.extra_s.size());
  EXPECT_EQ(0.0, q.extra_s[0]);
  EXPECT_GT(q.extra_s[15], 0.0);
  EXPECT_LT(q.extra_s[15], pass_time(8)) << "15 rows more are not priced at whole passes each";
  simulate(p, now, 5, 16, 8);
  simulate(p, now, 5, 64, 8);
  q = p.quote(4, 8, 15);
  EXPECT_NEAR(0.0, q.extra_s[7], 1e-9) << "8 -> 15 rows: interpolated between 8 and 16, both 50 ms";
  EXPECT_NEAR(pass_time(64) - pass_time(8), p.quote(4, 8, 56).extra_s[56], 1e-9);
  // Between two counts, halfway between their straight line and the roofline they imply (flat
  // at 16 rows' 50 ms, then 64 rows' seconds per row): pass_time's knee lies between them.
  const double line40 = pass_time(16) + (pass_time(64) - pass_time(16)) * 24.0 / 48.0;
  const double roof40 = std::max(pass_time(16), pass_time(64) * 40.0 / 64.0);
  EXPECT_LT(roof40, line40);
  EXPECT_NEAR(0.5 * (line40 + roof40), p.pass_seconds(40), 1e-12);
  // Beyond the largest count: along the widest measured slope.
  EXPECT_NEAR(pass_time(64) + (pass_time(64) - pass_time(8)) / 56.0 * 16, p.pass_seconds(80), 1e-9);
  // A noisy dip (a faster pass at more rows) never makes more rows cheaper.
  p.record_pass(20, 0.001, now);
  q = p.quote(4, 16, 15);
  for (size_t e = 1; e < q.extra_s.size(); ++e) EXPECT_GE(q.extra_s[e], q.extra_s[e - 1]);
  EXPECT_TRUE(q.batched());
  EXPECT_FALSE(p.quote(1, 8, 15).batched()) << "one slot: the controller decides alone";
}

// The slots' contexts grow, so every pass gets dearer while nearly all passes have one row
// count: a count measured long ago (a verify block's) is priced at today's level.
TEST(BatchPricing, ARarelyMeasuredCountIsPricedAtTheLevelOfTheCommonOne) {
  BatchPricing p;
  double now = 0;
  for (int i = 0; i < 20; ++i) p.record_pass(8, 0.040, now += 0.040);
  p.record_pass(15, 0.075, now += 0.075);  // 7 rows more cost 35 ms then
  for (int i = 0; i < 300; ++i) {  // 8 rows drift from 40 to 60 ms
    const double s = 0.040 + 0.020 * std::min(1.0, i / 200.0);
    p.record_pass(8, s, now += s);
  }
  EXPECT_NEAR(0.060, p.pass_seconds(8), 0.001);
  // Measured once at 75 ms against 40: 1.875 times a pass of 8 rows, now 112 ms. An EMA per
  // count alone priced the 7 rows at 75 - 60 = 15 ms.
  EXPECT_NEAR(0.060 * 0.875, p.quote(8, 8, 7).extra_s[7], 0.003);
  // A sample at the rare count moves its own shape; the common count keeps the level.
  p.record_pass(15, 0.110, now += 0.110);
  EXPECT_NEAR(0.110, p.pass_seconds(15), 0.004);
  EXPECT_NEAR(0.060, p.pass_seconds(8), 0.004);
}

// While other slots draft, the batch's measured goodput falls (their blocks and draft passes
// slow every pass); a block is still held to what the slots' plain rows would make.
TEST(BatchPricing, ABlockBeatsThePlainRowsGoodputEvenWhereOthersDraftedItDown) {
  BatchPricing p;
  double now = 0;
  simulate(p, now, 20, 8, 8);
  simulate(p, now, 20, 22, 4);  // others' blocks: 22-row passes that emit 4 tokens each
  ASSERT_NEAR(4 / pass_time(22), p.goodput(), 1e-6);
  // 7 others, two of them with blocks of 8 declared (14 extra rows), and this slot's row.
  const BatchQuote q = p.quote(8, 22, 7, 0, 0, 0, 14);
  EXPECT_NEAR(8 / pass_time(8), q.goodput, 1e-6) << "the plain rows' goodput, not the measured";
  EXPECT_NEAR(pass_time(22), q.pass_s, 1e-9) << "the extra rows are still priced beside the blocks";
  EXPECT_NEAR(22 / pass_time(22), p.quote(8, 22, 7).goodput, 1e-6) << "no blocks declared: 22 plain rows";
}

// A slot's controller beside 7 others, fed the batch's quote. Its blocks cost their extra rows
// and the draft's compute (4 ms unless said; a catch-up of the plain steps' context is not
// counted in the pass); each decision changes the batch's goodput, which is what is checked.
namespace {
struct SlotRun {
  double tokens = 0, seconds = 0;
  int blocks = 0;
};
SlotRun run_slot(SpecController& c, BatchPricing& p, double& now, int steps, bool draft_is_good,
                 double draft_s = 0.004, double catch_up_s = 0) {
  SlotRun r;
  for (int i = 0; i < steps; ++i) {
    const BatchQuote q = p.quote(8, 7, 15);
    const int B = choose_block(c, p, q);
    const int rows = 7 + B;
    double t = pass_time(rows);
    int tokens = 7 + 1;  // the 7 others decode plainly; this slot emits its bonus token
    if (B > 1) {
      const int accepted = draft_is_good ? B - 1 : 0;
      tokens += accepted;
      t += draft_s;
      judge_block(c, p, B, accepted, draft_s, t, catch_up_s);
      ++r.blocks;
    } else {
      c.record_plain(t);
    }
    p.add_tokens(tokens);
    now += t;
    p.record_pass(rows, pass_time(rows), now);
    r.tokens += tokens;
    r.seconds += t;
  }
  return r;
}
}  // namespace

TEST(BatchPricing, AGoodDraftIsFoundBesideOthersAndRaisesTheGoodput) {
  BatchPricing p;
  double now = 0;
  simulate(p, now, 20, 8, 8);
  simulate(p, now, 5, 64, 8);  // a prefill chunk taught the price of many rows
  SpecController c(16, true);
  // The prior alone does not pay beside 7 others; the first probe comes when its predicted
  // price fits the probe budget, finds the draft always right, and the slot drafts from then.
  const SlotRun found = run_slot(c, p, now, 400, true);
  EXPECT_GE(found.blocks, 1);
  const SlotRun after = run_slot(c, p, now, 200, true);
  EXPECT_GT(after.blocks, 190) << "once found, a draft that is always right drafts nearly every step";
  EXPECT_GT(after.tokens / after.seconds, 1.5 * 8 / pass_time(8)) << "and the batch's goodput rises well above plain";
}

TEST(BatchPricing, AUselessDraftStaysOffBesideOthersWithinTheProbeBudget) {
  BatchPricing p;
  double now = 0;
  simulate(p, now, 20, 8, 8);
  simulate(p, now, 5, 64, 8);
  SpecController c(16, true);
  const SlotRun r = run_slot(c, p, now, 400, false);
  const double plain_goodput = 8 / pass_time(8);
  EXPECT_LT(r.blocks, 20) << "probes only";
  EXPECT_GT(r.tokens / r.seconds, 0.97 * plain_goodput) << "a useless draft costs the batch at most 3%";
}

// Where a row costs the batch about what a token does (compute-bound passes: 8 streams on 2
// cores), no block could pay even if the draft were always right, so the slot never probes.
TEST(BatchPricing, NoProbeWhereEvenADraftThatIsAlwaysRightCouldNotPay) {
  auto cpu_pass = [](int rows) { return 0.040 + 0.005 * std::max(0, rows - 8) + 0.001 * std::min(rows, 8); };
  BatchPricing p;
  double now = 0;
  for (int rows : {8, 9, 11, 15, 8, 8, 8, 8, 8, 8, 8, 8, 8, 8, 8, 8, 8, 8, 8, 8, 8}) {
    p.add_tokens(8);
    p.record_pass(rows, cpu_pass(rows), now += cpu_pass(rows));
  }
  SpecController c(8, true);
  int blocks = 0;
  for (int i = 0; i < 3000; ++i) {
    const BatchQuote q = p.quote(8, 8, 7);
    ASSERT_TRUE(q.batched());
    const int B = choose_block(c, p, q);
    if (B > 1) {
      ++blocks;
      judge_block(c, p, B, B - 1, 0.004, cpu_pass(7 + B));
    }
    p.add_tokens(8 + (B - 1));
    p.record_pass(7 + B, cpu_pass(7 + B), now += cpu_pass(7 + B) + (B > 1 ? 0.004 : 0.0));
  }
  EXPECT_EQ(0, blocks) << "7 rows more cost 35 ms, in which the batch makes 7 tokens";
  // A batch where rows are cheap (flat up to 16 rows): the same slot probes and drafts.
  BatchPricing cheap;
  simulate(cheap, now, 20, 8, 8);
  simulate(cheap, now, 5, 64, 8);
  SpecController c2(8, true);
  EXPECT_GE(run_slot(c2, cheap, now, 400, true).blocks, 1);
}

TEST(BatchPricing, ADraftThatPaysAloneStaysOffWhereTheBatchMakesMore) {
  // Alone a pass is 50 ms, a block of 4 verifies in 52 ms and drafts in 25 ms, and 3 of 4
  // judged draft tokens are accepted: a block pays (1.8x). Beside 7 others making
  // 160 tokens/s, its 1.7 extra tokens cost the batch 25 ms, in which it makes 4 tokens (and
  // a larger block, more tokens but more rows past the flat part of a pass: no better).
  BatchPricing p;
  double now = 0;
  simulate(p, now, 20, 8, 8);
  simulate(p, now, 5, 64, 8);
  SpecController c(16, true);
  for (int i = 0; i < 5; ++i) c.record_plain(0.050);
  for (int i = 0; i < 50; ++i) c.record_spec(4, i % 2 ? 3 : 0, 0.025, 0.052);
  EXPECT_GT(c.next_block(nullptr), 1) << "alone it drafts";
  const BatchQuote q = p.quote(8, 7, 15);
  EXPECT_EQ(1, c.next_block(&q)) << "beside the others it does not";
}

TEST(BatchPricing, ASlotThatHasDraftedLittleIsPricedByTheOthersBlocks) {
  BatchPricing p;
  double now = 0;
  simulate(p, now, 20, 8, 8);
  simulate(p, now, 5, 64, 8);
  // The other slots' blocks of 8: everything accepted, 2 ms of draft each.
  for (int i = 0; i < 40; ++i) p.record_block(8, 7, 7, 0.002);
  BatchQuote q = p.quote(8, 7, 15);
  EXPECT_NEAR(0.002, q.draft_s[8], 1e-12);
  EXPECT_EQ(0.0, q.draft_s[4]) << "block sizes nobody drafted are not measured";
  SpecController fresh(16, true);
  EXPECT_GT(fresh.next_block(&q), 1) << "the others' acceptance and draft cost make a block pay at once";
  EXPECT_GT(fresh.alpha(), 0.8);
  // And where the others' blocks found nothing, a fresh slot does not draft beside them.
  BatchPricing p2;
  now = 0;
  simulate(p2, now, 20, 8, 8);
  simulate(p2, now, 5, 64, 8);
  for (int i = 0; i < 40; ++i) p2.record_block(8, 0, 1, 0.002);
  q = p2.quote(8, 7, 15);
  SpecController fresh2(16, true);
  EXPECT_EQ(1, fresh2.next_block(&q));
  EXPECT_LT(fresh2.alpha(), 0.2) << "the others' evidence (4 observations of nothing) outweighs the prior (0.5 of 2)";
}

// Eight slots with a useless draft, whose probe (a 40 ms draft plus a 5 ms catch-up) costs the
// batch about 7 tokens each time, each slot with its own controller as in a server. Their
// probes are paid from one account (BatchPricing::claim_probe): together they cost the batch
// the 2% probe budget over a short request (128 steps; plus what the account held when they
// started, 0.4%), less over a long run (each probe that finds nothing halves what the account
// earns), and they still look now and then.
TEST(BatchPricing, TheSlotsProbesShareOneBudgetOfTheBatch) {
  BatchPricing p;
  double now = 0;
  simulate(p, now, 20, 8, 8);
  simulate(p, now, 5, 64, 8);
  std::vector<SpecController> slots(8, SpecController(16, true));
  int probes = 0;
  std::vector<int> prober;
  auto run = [&](int steps) {
    double tokens = 0, seconds = 0;
    for (int i = 0; i < steps; ++i) {
      std::vector<int> B(slots.size());
      int rows = 0;
      for (size_t k = 0; k < slots.size(); ++k) {  // the slots come to decide in turns
        const size_t s = (size_t(i) + k) % slots.size();
        B[s] = choose_block(slots[s], p, p.quote(8, 7, 15));
        rows += B[s];
      }
      double t = pass_time(rows);
      for (size_t s = 0; s < slots.size(); ++s)
        if (B[s] > 1) t += 0.045;  // each probe's draft pass and catch-up hold the batch up
      for (size_t s = 0; s < slots.size(); ++s) {
        if (B[s] > 1) {
          ++probes;
          prober.push_back(int(s));
          judge_block(slots[s], p, B[s], 0, 0.040, t, 0.005);
        } else {
          slots[s].record_plain(t);
        }
      }
      p.add_tokens(8);  // one token a slot: nothing is ever accepted
      now += t;
      p.record_pass(rows, pass_time(rows), now);
      tokens += 8;
      seconds += t;
    }
    return tokens / seconds;
  };
  const double plain = 8 / pass_time(8);
  const double short_run = run(128);
  EXPECT_GT(short_run, (1 - 0.024) * plain) << probes << " probes in a short request";
  const double long_run = run(2000 - 128);
  EXPECT_GT(long_run, 0.99 * plain) << probes << " probes in all";
  EXPECT_GE(probes, 3) << "the batch still looks now and then";
  EXPECT_GT(std::set<int>(prober.begin(), prober.end()).size(), 1u) << "and not always through the same slot";
}

// A probe is settled at what it cost the batch (its accepted tokens taken off), whether or not a
// block like it pays by the estimate it leaves: a probe that "paid" got its whole price back
// before, though it had lost the batch tokens. Whether it paid sets only what the account earns.
TEST(BatchPricing, AProbeIsSettledAtWhatItCostWhetherOrNotABlockLikeItPays) {
  BatchPricing p;
  double now = 0;
  simulate(p, now, 50, 8, 8);  // 400 tokens: 8 tokens in the account
  const double credit = p.quote(8, 8, 7).probe_credit;
  ASSERT_NEAR(400 * kProbeBudget, credit, 1e-9);
  p.claim_probe(5);
  EXPECT_EQ(0.0, p.quote(8, 8, 7).probe_credit) << "one probe at a time";
  p.settle_probe(ProbeSettlement{5, 2, true});
  EXPECT_NEAR(credit - 2, p.quote(8, 8, 7).probe_credit, 1e-9) << "it paid by its estimate but lost 2 tokens";
  p.claim_probe(5);
  p.settle_probe(ProbeSettlement{5, 0, true});
  EXPECT_NEAR(credit - 2, p.quote(8, 8, 7).probe_credit, 1e-9) << "its accepted tokens covered it";
  simulate(p, now, 10, 8, 8);
  EXPECT_NEAR(credit - 2 + 80 * kProbeBudget, p.quote(8, 8, 7).probe_credit, 1e-9) << "earning at the full rate";
  p.claim_probe(5);
  p.settle_probe(ProbeSettlement{5, 7, false});
  EXPECT_NEAR(credit - 9 + 80 * kProbeBudget, p.quote(8, 8, 7).probe_credit, 1e-9) << "more than it was priced at";
  simulate(p, now, 10, 8, 8);
  EXPECT_NEAR(credit - 9 + 120 * kProbeBudget, p.quote(8, 8, 7).probe_credit, 1e-9) << "a probe that did not pay halves the rate";
}

// A probe beside others feeds the draft only its newest kProbeContextRows context rows, so its
// price holds the catch-up of those alone: 400 rows waiting cost it what 32 do.
TEST(BatchPricing, AProbeBesideOthersIsPricedForTheContextRowsItFeeds) {
  BatchPricing p;
  double now = 0;
  simulate(p, now, 20, 8, 8);
  simulate(p, now, 5, 64, 8);
  p.record_context(100, 0.020);  // 0.2 ms a context row
  simulate(p, now, 300, 8, 8);   // the account fills
  auto claim = [&](int waiting) {
    SpecController c(8, true);
    const BatchQuote q = p.quote(8, 7, 7, 0, waiting);
    for (int i = 0; i < 100; ++i)
      if (c.next_block(&q) > 1) return c.probe_claim();
    return 0.0;
  };
  const double G = p.quote(8, 7, 7).goodput;
  const double fed = claim(kProbeContextRows), waiting = claim(400);
  ASSERT_GT(fed, 0) << "a probe, once the account holds its price";
  EXPECT_NEAR(fed, waiting, 1e-9) << "400 rows waiting: the probe feeds 32";
  EXPECT_NEAR(G * 0.0002 * (kProbeContextRows / 2), fed - claim(kProbeContextRows / 2), 1e-9)
      << "below the cap each row fed is priced";
}

// A probe beside others whose own pass shows that rows cost far more than the batch had
// measured: every row past 8 costs 20 ms (a small machine whose passes are compute-bound
// already), where the prior priced 3 rows at 3 ms. The draft is always right, yet its blocks
// do not pay there, and no probe follows while they could not.
namespace {
double steep_pass(int rows) { return 0.050 + 0.020 * std::max(0, rows - 8); }
}  // namespace
TEST(BatchPricing, AProbeThatMeasuredDearRowsWaitsForTheirPrice) {
  BatchPricing p;
  double now = 0;
  simulate(p, now, 20, 8, 8);  // 8 slots decoding, 160 tok/s
  SpecController c(4, true);
  std::vector<int> probes;
  for (int i = 0; i < 1200; ++i) {
    const BatchQuote q = p.quote(8, /*others' rows and this slot's=*/8, 3);
    const int B = choose_block(c, p, q);
    const int rows = 7 + B;
    double t = steep_pass(rows);
    if (B > 1) {
      probes.push_back(i);
      t += 0.004;
      judge_block(c, p, B, B - 1, 0.004, t);  // the draft is always right
    } else {
      c.record_plain(t);
    }
    p.add_tokens(7 + B);
    now += t;
    p.record_pass(rows, steep_pass(rows), now);
  }
  // Its 3 rows cost 60 ms, in which the batch makes 9.6 tokens: a block of 4 could not pay
  // even with all 3 draft tokens accepted, so no probe follows (at the price before the
  // first, one every 55 steps: 21; before 2026-12-07, one every 500 steps: 2 to 4).
  EXPECT_EQ(1u, probes.size()) << "one probe: the one made before rows were measured";
  // Beside one other slot the same rows sit in the flat part of a pass: it looks again.
  int later = -1;
  for (int i = 0; i < 300 && later < 0; ++i) {
    const BatchQuote q = p.quote(2, 2, 3);
    const int B = choose_block(c, p, q);
    if (B > 1) later = i;
    p.add_tokens(2);
    now += steep_pass(2);
    p.record_pass(2, steep_pass(2), now);
  }
  EXPECT_GE(later, 0) << "where a block could pay, probes come back";
}

// Slots that draft at the same step share one draft pass (StepBatcher::draft): a block that
// joins blocks already waiting pays what its rows add to that pass, not a pass of its own.
TEST(BatchPricing, ABlockJoiningOthersInTheirDraftPassPaysOnlyItsRows) {
  BatchPricing p;
  double now = 0;
  simulate(p, now, 20, 8, 8);
  // Draft passes read the draft's weights once: 3 block rows 10 ms, 12 rows 13 ms.
  for (int i = 0; i < 20; ++i) {
    p.record_draft_pass(3, 0.010);
    p.record_draft_pass(12, 0.013);
  }
  const BatchQuote alone = p.quote(4, 8, 7);
  EXPECT_FALSE(alone.joining);
  EXPECT_NEAR(0.010, alone.draft_s[4], 1e-12) << "B=4 alone: a pass of 3 rows";
  const BatchQuote join = p.quote(4, 8, 7, /*draft_rows=*/3);
  EXPECT_TRUE(join.joining);
  // pass(6): halfway between the line (11 ms) and the roofline (max(10, 13 x 6 / 12) = 10 ms).
  EXPECT_NEAR(0.0005, join.draft_s[4], 1e-12) << "B=4 beside 3 rows waiting: pass(6) - pass(3), 10.5 - 10 ms";
  EXPECT_LT(join.draft_s[8], alone.draft_s[8]);
  // At or below the smallest count measured the price would come out free; it takes the
  // prior's share per row (0.15 of the 3-row pass per row).
  const BatchQuote tiny = p.quote(4, 8, 7, /*draft_rows=*/1);
  EXPECT_NEAR(0.15 * 0.010 / 3 * 1, tiny.draft_s[2], 1e-12);
}

// The context rows a slot has waiting (its plain steps' taps) go into the draft pass before
// its block: their price, at the measured seconds per context row, is quoted with the block.
TEST(BatchPricing, CatchUpIsPricedAtTheMeasuredSecondsPerContextRow) {
  BatchPricing p;
  double now = 0;
  simulate(p, now, 20, 8, 8);
  EXPECT_EQ(0.0, p.quote(4, 8, 7, 0, 100).catch_up_s) << "nothing measured yet, no prefill pass either";
  simulate(p, now, 2, 64, 8);  // a prefill chunk: before a catch-up is measured, a row is priced as its rows
  EXPECT_NEAR(100 * pass_time(64) / 64, p.quote(4, 8, 7, 0, 100).catch_up_s, 1e-12);
  // With the share of weights a context row goes through (the draft's fc and k/v over the
  // target's), that share of a prefill row.
  EXPECT_NEAR(0.02 * 100 * pass_time(64) / 64, p.quote(4, 8, 7, 0, 100, 0.02).catch_up_s, 1e-12);
  p.record_context(4, 1.0);  // a few rows are bound by reading the weights: not a per-row price
  EXPECT_NEAR(100 * pass_time(64) / 64, p.quote(4, 8, 7, 0, 100).catch_up_s, 1e-12);
  p.record_context(100, 0.020);
  EXPECT_NEAR(50 * 0.0002, p.quote(4, 8, 7, 0, 50).catch_up_s, 1e-12);
  EXPECT_EQ(0.0, p.quote(4, 8, 7, 0, 0).catch_up_s);
}

// A slot whose next block would first feed the draft many waiting context rows weighs that
// cost too, spread over the blocks the request may still draft (it is paid once): the same
// draft that pays with nothing waiting does not pay with 400 rows waiting and a few tokens
// left, and does with many left (up to a horizon of 256 tokens).
TEST(BatchPricing, ABlockThatMustCatchUpFirstPaysForIt) {
  BatchPricing p;
  double now = 0;
  simulate(p, now, 20, 8, 8);  // 8 slots, 160 tok/s
  for (int i = 0; i < 20; ++i) p.record_draft_pass(3, 0.004);
  p.record_context(100, 0.020);
  auto decide = [&](int waiting, int tokens_left) {
    SpecController c(8, true);
    for (int i = 0; i < 20; ++i) {
      const BatchQuote q = p.quote(8, 7, 7, 0, waiting);
      c.next_block(&q, tokens_left);
      c.record_spec(4, 3, 0.004, 0.05, 0);  // a draft that is accepted nearly always
    }
    const BatchQuote q = p.quote(8, 7, 7, 0, waiting);
    return c.next_block(&q, tokens_left);
  };
  EXPECT_GT(decide(0, 8), 1) << "pays with nothing waiting";
  EXPECT_EQ(1, decide(400, 8)) << "400 rows waiting cost 80 ms of the batch, and one block can emit all 8 tokens left";
  EXPECT_EQ(1, decide(400, 12)) << "about 2 blocks left: 40 ms of catch-up each, more than their 5-6 extra tokens make";
  EXPECT_GT(decide(400, 40), 1) << "about 6 blocks left: 13 ms each, paid back";
  EXPECT_GT(decide(400, 1000), 1) << "about 40 blocks within the 256-token horizon: 2 ms each";
  EXPECT_EQ(decide(400, 256), decide(400, 100000)) << "beyond the horizon the tokens left do not count";
}
