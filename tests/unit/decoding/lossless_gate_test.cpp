// The lossless gate: greedy output with DFlash speculation is token-for-token the output of
// plain greedy decoding, for 20 prompts x block sizes 2, 4, 8, 16 x prefill chunk sizes
// 1, 7, 64, 512 x weight formats bf16 and q4, on the shipped demo pair, on a random pair and on a random Qwen3.5 hybrid target with that draft.
#include <gtest/gtest.h>

#include <string>

#include "models/target_model.h"
#include "decoding/speculative.h"
#include "models/dflash/dflash_draft.h"
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
  long runs = 0, accepted = 0, drafted = 0;
};

// void so that ASSERT_* can stop at the first mismatch.
void gate(const std::string& target_dir, const std::string& draft_dir,
          const std::vector<std::vector<int32_t>>& prompts, int max_tokens, GateResult& res) {
  for (WType w : {WType::BF16, WType::Q4_0}) {
    LoadOptions lo;
    lo.backend = make_cpu_backend(2);
    lo.weights = w;
    auto target = TargetModel::load(target_dir, lo);
    auto draft = DFlashDraft::load(draft_dir, lo, *target);
    for (size_t p = 0; p < prompts.size(); ++p) {
      GenerateParams gp;
      gp.max_tokens = max_tokens;
      gp.stop_ids = target->config().eos_ids;
      gp.chunk_size = 512;
      Generator plain_gen(*target, 1024);
      const auto plain = run(plain_gen, prompts[p], gp);
      for (int chunk : {1, 7, 64, 512}) {
        gp.chunk_size = chunk;
        Generator again(*target, 1024);
        ASSERT_EQ(plain, run(again, prompts[p], gp)) << "plain decoding depends on the chunk size " << chunk;
        for (int B : {2, 4, 8, 16}) {
          SpeculativeGenerator sg(*target, *draft, 1024, SpecParams{B, /*adaptive=*/false});
          ASSERT_EQ(plain, run(sg, prompts[p], gp))
              << target_dir << " " << wtype_name(w) << " prompt " << p << " chunk " << chunk << " B " << B;
          res.accepted += sg.stats().accepted;
          res.drafted += sg.stats().drafted;
          ++res.runs;
        }
      }
      // The adaptive controller must not change the output either.
      SpeculativeGenerator adaptive(*target, *draft, 1024, SpecParams{16, true});
      ASSERT_EQ(plain, run(adaptive, prompts[p], gp)) << "adaptive, prompt " << p;
    }
  }
}

}  // namespace

TEST(LosslessGate, DemoPair) {
  const std::string t = kSrc + "/models/demo/target", d = kSrc + "/models/demo/draft";
  ASSERT_TRUE(file_exists(t + "/model.safetensors") && file_exists(d + "/model.safetensors"))
      << "the shipped demo pair is missing under models/demo";
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
  // The trained draft must be accepted far above chance (1/4032 for a random draft), or this
  // gate would only exercise rejection.
  EXPECT_GT(double(r.accepted) / double(r.drafted), 0.03);
}

TEST(LosslessGate, RandomPair) {
  const std::string t = kSrc + "/tests/data/random_pair/target", d = kSrc + "/tests/data/random_pair/draft";
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
}

// The same random draft on a random Qwen3.5 hybrid target (linear, linear, full attention
// layers): the recurrent state is rolled back by replay after every partial acceptance.
TEST(LosslessGate, RandomHybridPair) {
  const std::string t = kSrc + "/tests/data/random_hybrid/target", d = kSrc + "/tests/data/random_pair/draft";
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
}
