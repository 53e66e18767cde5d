// The lossless gate for DFlash2 drafts: greedy output with the candidate selector proposing
// tokens is token-for-token plain greedy decoding, for 20 prompts x block sizes 2, 4, 8, 16 x
// prefill chunk sizes 1, 7, 64, 512 x bf16 and q4, on the shipped demo DFlash2 draft
// (models/demo/draft2, trained) and on a random DFlash2 draft (sliding window, softcap,
// output multiplier, embedding scale) of the random test target.
#include <gtest/gtest.h>

#include <string>

#include "models/target_model.h"
#include "decoding/speculative.h"
#include "models/dflash/dflash2_draft.h"
#include "tokenizer/tokenizer.h"
#include "util/mapped_file.h"

using namespace dflash;

namespace {

const std::string kSrc = DFLASH_SOURCE_DIR;

std::vector<int32_t> run(Generator& g, const std::vector<int32_t>& prompt, const GenerateParams& gp) {
  g.start(prompt, gp);
  std::vector<int32_t> out;
  while (g.step(out)) {
  }
  return out;
}

struct GateResult {
  long runs = 0, accepted = 0, drafted = 0, blocks = 0;
};

void gate(const std::string& target_dir, const std::string& draft_dir,
          const std::vector<std::vector<int32_t>>& prompts, int max_tokens, GateResult& res) {
  for (WType w : {WType::BF16, WType::Q4_0}) {
    LoadOptions lo;
    lo.backend = make_cpu_backend(2);
    lo.weights = w;
    auto target = TargetModel::load(target_dir, lo);
    auto draft = DFlashDraft::load(draft_dir, lo, *target);  // auto-detects v2
    ASSERT_STREQ("dflash2", draft->kind());
    ASSERT_TRUE(draft->proposes_tokens());
    const auto* d2 = dynamic_cast<const DFlash2Draft*>(draft.get());
    ASSERT_NE(nullptr, d2);
    d2->reset_timing();
    for (size_t p = 0; p < prompts.size(); ++p) {
      GenerateParams gp;
      gp.max_tokens = max_tokens;
      gp.stop_ids = target->config().eos_ids;
      gp.chunk_size = 512;
      Generator plain_gen(*target, 1024);
      const auto plain = run(plain_gen, prompts[p], gp);
      for (int chunk : {1, 7, 64, 512}) {
        gp.chunk_size = chunk;
        for (int B : {2, 4, 8, 16}) {
          SpeculativeGenerator sg(*target, *draft, 1024, SpecParams{B, /*adaptive=*/false});
          ASSERT_EQ(plain, run(sg, prompts[p], gp))
              << draft_dir << " " << wtype_name(w) << " prompt " << p << " chunk " << chunk << " B " << B;
          ASSERT_EQ("on", sg.stats().speculation);
          res.accepted += sg.stats().accepted;
          res.drafted += sg.stats().drafted;
          ++res.runs;
        }
      }
      SpeculativeGenerator adaptive(*target, *draft, 1024, SpecParams{16, true});
      ASSERT_EQ(plain, run(adaptive, prompts[p], gp)) << "adaptive, prompt " << p;
    }
    res.blocks += d2->timing().blocks;
  }
}

}  // namespace

TEST(LosslessGate2, DemoPair) {
  const std::string t = kSrc + "/models/demo/target", d = kSrc + "/models/demo/draft2";
  ASSERT_TRUE(file_exists(t + "/model.safetensors") && file_exists(d + "/model.safetensors"))
      << "the shipped demo target / DFlash2 draft is missing under models/demo";
  Tokenizer tok = Tokenizer::from_folder(t);
  const char* texts[] = {
      "def parse_args(", "import os\n\nclass ", "    def __init__(self, ", "for i in range(",
      "\"\"\"Return the", "if __name__ == '__main__':\n", "    return ", "def _check_", "try:\n    import ",
      "class Error(Exception):\n", "    @property\n    def ", "with open(", "def __repr__(self):\n",
      "# Copyright", "    raise ValueError(", "lines = [", "def main():\n    ", "elif ", "self.assert",
      "<|im_start|>user\nWrite a function that adds two numbers.<|im_end|>\n<|im_start|>assistant\n"};
  std::vector<std::vector<int32_t>> prompts;
  for (const char* s : texts) prompts.push_back(tok.encode(s));
  GateResult r;
  gate(t, d, prompts, 40, r);
  if (HasFatalFailure()) return;
  EXPECT_EQ(20 * 4 * 4 * 2, r.runs);
  EXPECT_GT(r.blocks, r.runs);
  // The trained selector must be accepted far above chance, or this gate would only exercise
  // rejection.
  EXPECT_GT(double(r.accepted) / double(r.drafted), 0.03);
}

TEST(LosslessGate2, RandomPair) {
  const std::string t = kSrc + "/tests/data/random_pair/target", d = kSrc + "/tests/data/random_pair2/draft";
  std::vector<std::vector<int32_t>> prompts;
  for (int p = 0; p < 20; ++p) {
    std::vector<int32_t> ids;
    for (int i = 0; i < 5 + 3 * p; ++i) ids.push_back(int32_t((p * 131 + i * 17 + 3) % 370));
    prompts.push_back(ids);
  }
  GateResult r;
  gate(t, d, prompts, 40, r);
  if (HasFatalFailure()) return;
  EXPECT_EQ(20 * 4 * 4 * 2, r.runs);
  // Every speculative step went through the selector (the gate tests its tokens, not argmax).
  EXPECT_GT(r.blocks, r.runs);
}

// The same random draft on a random Qwen3.5 hybrid target (linear, linear, full attention
// layers): the recurrent state is rolled back by replay after every partial acceptance.
TEST(LosslessGate2, RandomHybridPair) {
  const std::string t = kSrc + "/tests/data/random_hybrid/target", d = kSrc + "/tests/data/random_pair2/draft";
  std::vector<std::vector<int32_t>> prompts;
  for (int p = 0; p < 20; ++p) {
    std::vector<int32_t> ids;
    for (int i = 0; i < 5 + 3 * p; ++i) ids.push_back(int32_t((p * 131 + i * 17 + 3) % 370));
    prompts.push_back(ids);
  }
  GateResult r;
  gate(t, d, prompts, 40, r);
  if (HasFatalFailure()) return;
  EXPECT_EQ(20 * 4 * 4 * 2, r.runs);
  // Every speculative step went through the selector (the gate tests its tokens, not argmax).
  EXPECT_GT(r.blocks, r.runs);
}

// The shipped Qwen3.5 hybrid demo pair (models/demo35): a trained DFlash2 draft on a Gated
// DeltaNet target, so partial acceptances (rollbacks by replay inside verify blocks) are common.
TEST(LosslessGate2, HybridDemoPair) {
  const std::string t = kSrc + "/models/demo35/target", d = kSrc + "/models/demo35/draft2";
  ASSERT_TRUE(file_exists(t + "/model.safetensors") && file_exists(d + "/model.safetensors"))
      << "the shipped hybrid demo pair is missing under models/demo35";
  Tokenizer tok = Tokenizer::from_folder(t);
  const char* texts[] = {
      "def parse_args(", "import os\n\nclass ", "    def __init__(self, ", "for i in range(",
      "\"\"\"Return the", "if __name__ == '__main__':\n", "    return ", "def _check_", "try:\n    import ",
      "class Error(Exception):\n", "    @property\n    def ", "with open(", "def __repr__(self):\n",
      "# Copyright", "    raise ValueError(", "lines = [", "def main():\n    ", "elif ", "self.assert",
      "<|im_start|>user\nWrite a function that adds two numbers.<|im_end|>\n<|im_start|>assistant\n"};
  std::vector<std::vector<int32_t>> prompts;
  for (const char* s : texts) prompts.push_back(tok.encode(s));
  GateResult r;
  gate(t, d, prompts, 40, r);
  if (HasFatalFailure()) return;
  EXPECT_EQ(20 * 4 * 4 * 2, r.runs);
  EXPECT_GT(r.blocks, r.runs);
  // The trained draft is accepted far above chance, so rollbacks into blocks are exercised.
  EXPECT_GT(double(r.accepted) / double(r.drafted), 0.1);
}
