// Generator::save / restore (the server's prompt cache, --cache-ram): a conversation's context
// saved from one generator and restored into a fresh one serves a follow-up prompt that
// continues it, and the follow-up's tokens are exactly those a generator that never saw the
// conversation produces. Dense (models/demo) and hybrid (models/demo35) targets, plain and
// with their DFlash2 drafts. A hybrid's snapshot sits at its prompt checkpoint; a dense one at
// its whole length, and it serves any shorter prefix. A snapshot never goes into a state of
// another layout.
#include <gtest/gtest.h>

#include <random>
#include <string>

#include "decoding/speculative.h"
#include "models/dflash/dflash_draft.h"
#include "models/target_model.h"

using namespace dflash;

namespace {

const std::string kSrc = DFLASH_SOURCE_DIR;
constexpr int kCtx = 512;

std::vector<int32_t> run(Generator& g, const std::vector<int32_t>& prompt, int checkpoint_at = -1) {
  GenerateParams gp;
  gp.max_tokens = 16;
  gp.ignore_eos = true;
  gp.checkpoint_at = checkpoint_at;
  g.start(prompt, gp);
  std::vector<int32_t> out;
  while (g.step(out)) {
  }
  return out;
}

void check_round_trip(const std::string& target_dir, const std::string& draft_dir, bool recurrent) {
  LoadOptions lo;
  lo.backend = make_cpu_backend(2);
  auto target = TargetModel::load(target_dir, lo);
  std::unique_ptr<DFlashDraft> draft;
  if (!draft_dir.empty()) draft = DFlashDraft::load(draft_dir, lo, *target);
  auto make = [&]() -> std::unique_ptr<Generator> {
    if (draft) return std::make_unique<SpeculativeGenerator>(*target, *draft, kCtx, SpecParams{4, false});
    return std::make_unique<Generator>(*target, kCtx);
  };
  std::mt19937 rng(11);
  std::vector<int32_t> prompt(40);
  for (int32_t& t : prompt) t = int32_t(rng() % 3000);
  const int part = 33;  // where the follow-up parts from this turn (the server's checkpoint_at)

  auto first = make();
  const auto answer = run(*first, prompt, part);
  auto snap = first->save();
  ASSERT_NE(nullptr, snap);
  const int n = int(snap->tokens.size());
  EXPECT_EQ(recurrent ? part : int(prompt.size() + answer.size()) - 1, n) << "where the snapshot sits";
  EXPECT_EQ(!recurrent, snap->target->any_prefix);
  if (draft) {
    ASSERT_NE(nullptr, snap->draft);
    EXPECT_GE(snap->draft->length, part);
  }

  // A follow-up that keeps `part` tokens of the conversation and goes on differently.
  std::vector<int32_t> follow(prompt.begin(), prompt.begin() + part);
  for (int i = 0; i < 12; ++i) follow.push_back(int32_t(rng() % 3000));
  auto restored = make();
  ASSERT_TRUE(restored->restore(*snap));
  const auto got = run(*restored, follow);
  auto fresh = make();
  const auto want = run(*fresh, follow);
  EXPECT_EQ(want, got) << target_dir;
  EXPECT_EQ(0, fresh->cached_tokens());
  EXPECT_EQ(part, restored->cached_tokens()) << "the restored context served the shared prefix";

  // A dense snapshot serves a prompt that parts inside what it holds, too.
  if (!recurrent) {
    std::vector<int32_t> shorter(prompt.begin(), prompt.begin() + 20);
    shorter.push_back(5);
    auto again = make();
    ASSERT_TRUE(again->restore(*snap));
    EXPECT_EQ(run(*make(), shorter), run(*again, shorter));
    EXPECT_EQ(20, again->cached_tokens());
  }
}

}  // namespace

TEST(PromptSnapshot, DenseRoundTrip) { check_round_trip(kSrc + "/models/demo/target", "", false); }
TEST(PromptSnapshot, DenseSpeculativeRoundTrip) {
  check_round_trip(kSrc + "/models/demo/target", kSrc + "/models/demo/draft2", false);
}
TEST(PromptSnapshot, HybridRoundTrip) { check_round_trip(kSrc + "/models/demo35/target", "", true); }
TEST(PromptSnapshot, HybridSpeculativeRoundTrip) {
  check_round_trip(kSrc + "/models/demo35/target", kSrc + "/models/demo35/draft2", true);
}

TEST(PromptSnapshot, AStateRefusesASnapshotOfAnotherLayout) {
  LoadOptions lo;
  lo.backend = make_cpu_backend(2);
  auto dense = TargetModel::load(kSrc + "/models/demo/target", lo);
  auto hybrid = TargetModel::load(kSrc + "/models/demo35/target", lo);
  Generator d(*dense, kCtx), h(*hybrid, kCtx);
  run(d, {1, 2, 3, 4, 5, 6});
  run(h, {1, 2, 3, 4, 5, 6}, 4);
  auto ds = d.save(), hs = h.save();
  ASSERT_NE(nullptr, ds);
  ASSERT_NE(nullptr, hs);
  const auto before = h.tokens();
  EXPECT_FALSE(h.restore(*ds));
  EXPECT_FALSE(d.restore(*hs));
  EXPECT_EQ(before, h.tokens()) << "a refused restore changes nothing";
  Generator small(*dense, 8);  // too short for the snapshot
  EXPECT_FALSE(small.restore(*ds));
}
