// BatchSpecGate (decoding/batch_spec_gate.h) on a simulated batch: passes at a fixed pace,
// tokens per pass depending on whether speculation is allowed. The gate must settle on the
// setting with the higher goodput, stand aside for a single slot, measure again when the
// number of slots changes, and re-measure after its exploit windows.
#include <gtest/gtest.h>

#include "decoding/batch_spec_gate.h"

using namespace dflash;

namespace {

// Runs `passes` passes of 10 ms with `active` slots; each emits tokens_on / tokens_off.
void simulate(BatchSpecGate& g, double& now, int passes, int active, int tokens_on, int tokens_off) {
  for (int i = 0; i < passes; ++i) {
    g.add_tokens(g.allowed() ? tokens_on : tokens_off);
    now += 0.010;
    g.after_pass(active, now);
  }
}

}  // namespace

// Windows of 5 passes (0.05 s); the first pass of a batch size only starts the measurement, so
// the first decision comes after 11 passes, and exploiting lasts 4 windows (20 passes).
constexpr double kWindowS = 0.045;

TEST(BatchSpecGate, KeepsSpeculationWhereItRaisesGoodput) {
  BatchSpecGate g(kWindowS, /*window_passes=*/5, /*exploit_windows=*/4);
  double now = 0;
  simulate(g, now, 11, 4, /*on=*/9, /*off=*/4);
  EXPECT_EQ(1u, g.decisions());
  EXPECT_TRUE(g.allowed());
  simulate(g, now, 19, 4, 9, 4);
  EXPECT_TRUE(g.allowed());
  EXPECT_GT(g.goodput_on(), g.goodput_off());
  EXPECT_NEAR(900.0, g.goodput_on(), 100.0);
}

TEST(BatchSpecGate, SwitchesSpeculationOffWhereItLowersGoodput) {
  BatchSpecGate g(kWindowS, 5, 4);
  double now = 0;
  simulate(g, now, 11, 4, /*on=*/3, /*off=*/4);
  EXPECT_EQ(1u, g.decisions());
  EXPECT_FALSE(g.allowed());
  simulate(g, now, 19, 4, 3, 4);
  EXPECT_FALSE(g.allowed());
  // After its exploit windows it measures again, with speculation allowed.
  simulate(g, now, 1, 4, 3, 4);
  EXPECT_TRUE(g.allowed());
  simulate(g, now, 10, 4, 3, 4);
  EXPECT_EQ(2u, g.decisions());
  EXPECT_FALSE(g.allowed());
}

TEST(BatchSpecGate, TiesGoToPlainDecoding) {
  BatchSpecGate g(kWindowS, 5, 4);
  double now = 0;
  simulate(g, now, 11, 2, 4, 4);
  EXPECT_EQ(1u, g.decisions());
  EXPECT_FALSE(g.allowed());
}

TEST(BatchSpecGate, StandsAsideForOneSlotAndStartsOverWhenSlotsChange) {
  BatchSpecGate g(kWindowS, 5, 4);
  double now = 0;
  simulate(g, now, 100, 1, 3, 4);
  EXPECT_TRUE(g.allowed());
  EXPECT_EQ(0u, g.decisions());
  simulate(g, now, 11, 3, 3, 4);
  EXPECT_FALSE(g.allowed());
  simulate(g, now, 1, 2, 3, 4);  // a slot left: measure again, from speculation allowed
  EXPECT_TRUE(g.allowed());
  EXPECT_EQ(1u, g.decisions());
}

TEST(BatchSpecGate, ReturnsToTheDecisionOfASlotCountItHasMeasured) {
  BatchSpecGate g(kWindowS, 5, 4);
  double now = 0;
  simulate(g, now, 11, 4, /*on=*/3, /*off=*/4);  // 4 slots: off
  EXPECT_FALSE(g.allowed());
  simulate(g, now, 11, 3, /*on=*/9, /*off=*/4);  // 3 slots: measured, on
  EXPECT_TRUE(g.allowed());
  EXPECT_EQ(2u, g.decisions());
  simulate(g, now, 1, 4, 3, 4);  // back to 4: its decision at once, no measurement
  EXPECT_FALSE(g.allowed());
  simulate(g, now, 1, 3, 9, 4);
  EXPECT_TRUE(g.allowed());
  EXPECT_EQ(2u, g.decisions());
}
