// Prefix reuse on a recurrent state: a follow-up request that extends the previous prompt
// resumes from the checkpoint the generator kept one row short of that prompt's end, and its
// output is exactly a fresh generator's. Plain and speculative generators alike.
#include <gtest/gtest.h>

#include <string>
#include <vector>

#include "decoding/generator.h"
#include "decoding/speculative.h"
#include "models/dflash/dflash_draft.h"
#include "models/target_model.h"

using namespace dflash;

namespace {

const std::string kSrc = DFLASH_SOURCE_DIR;

std::vector<int32_t> run(Generator& g, const std::vector<int32_t>& prompt) {
  GenerateParams gp;
  gp.max_tokens = 12;
  gp.ignore_eos = true;
  gp.chunk_size = 5;
  g.start(prompt, gp);
  std::vector<int32_t> out;
  while (g.step(out)) {
  }
  return out;
}

}  // namespace

TEST(HybridPrefixReuse, AFollowUpResumesFromThePromptCheckpoint) {
  LoadOptions lo;
  lo.backend = make_cpu_backend(2);
  auto target = TargetModel::load(kSrc + "/tests/data/random_hybrid/target", lo);
  auto draft = DFlashDraft::load(kSrc + "/tests/data/random_pair/draft", lo, *target);
  std::vector<int32_t> first;
  for (int i = 0; i < 23; ++i) first.push_back(int32_t((i * 53 + 7) % 380));
  for (int spec = 0; spec < 2; ++spec) {
    std::unique_ptr<Generator> g = spec ? std::make_unique<SpeculativeGenerator>(*target, *draft, 256, SpecParams{4, false})
                                        : std::make_unique<Generator>(*target, 256);
    const auto out1 = run(*g, first);
    // The follow-up: the first prompt, a different "answer", a new turn.
    std::vector<int32_t> second = first;
    for (int i = 0; i < 9; ++i) second.push_back(int32_t((i * 31 + 2) % 380));
    const auto out2 = run(*g, second);
    EXPECT_EQ(int(first.size()) - 1, g->cached_tokens()) << "spec " << spec;
    Generator fresh(*target, 256);
    EXPECT_EQ(run(fresh, second), out2) << "spec " << spec;
    // The same prompt again: the checkpoint one row short of its end serves it too.
    const auto out3 = run(*g, second);
    EXPECT_EQ(int(second.size()) - 1, g->cached_tokens());
    EXPECT_EQ(out2, out3);
    EXPECT_EQ(12u, out1.size());
  }
}
