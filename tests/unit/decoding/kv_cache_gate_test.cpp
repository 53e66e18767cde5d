// The lossless gate with quantized KV caches: speculative greedy output equals plain greedy
// output with the same target cache format (q8, q4), whatever the block size, the prefill
// chunk size and the draft's own cache format. Quantization rounds each cached row on its
// own, so verify and decode still see identical bytes.
#include <gtest/gtest.h>

#include <string>

#include "models/dense/dense_model.h"
#include "decoding/speculative.h"
#include "models/dflash/dflash_draft.h"
#include "tokenizer/tokenizer.h"

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

struct Counts {
  long runs = 0, accepted = 0, drafted = 0;
};

void gate(const std::string& target_dir, const std::string& draft_dir,
          const std::vector<std::vector<int32_t>>& prompts, WType weights, Counts& res) {
  LoadOptions lo;
  lo.backend = make_cpu_backend(2);
  lo.weights = weights;
  auto target = DenseModel::load(target_dir, lo);
  auto draft = DFlashDraft::load(draft_dir, lo, *target);
  for (WType ct : {WType::Q8_0, WType::Q4_0}) {
    target->set_cache_type(ct);
    for (WType dt : {WType::F32, ct}) {
      draft->set_cache_type(dt);
      for (size_t p = 0; p < prompts.size(); ++p) {
        GenerateParams gp;
        gp.max_tokens = 32;
        gp.stop_ids = target->config().eos_ids;
        Generator plain_gen(*target, 512);
        const auto plain = run(plain_gen, prompts[p], gp);
        for (int chunk : {1, 7, 512}) {
          gp.chunk_size = chunk;
          Generator again(*target, 512);
          ASSERT_EQ(plain, run(again, prompts[p], gp)) << "plain, " << wtype_name(ct) << " cache, chunk " << chunk;
          for (int B : {2, 4, 8, 16}) {
            SpeculativeGenerator sg(*target, *draft, 512, SpecParams{B, /*adaptive=*/false});
            ASSERT_EQ(plain, run(sg, prompts[p], gp))
                << target_dir << " target cache " << wtype_name(ct) << " draft cache " << wtype_name(dt)
                << " prompt " << p << " chunk " << chunk << " B " << B;
            res.accepted += sg.stats().accepted;
            res.drafted += sg.stats().drafted;
            ++res.runs;
          }
        }
      }
    }
  }
}

}  // namespace

TEST(KVCacheGate, DemoPairWithQuantizedCaches) {
  const std::string t = kSrc + "/models/demo/target", d = kSrc + "/models/demo/draft";
  Tokenizer tok = Tokenizer::from_folder(t);
  std::vector<std::vector<int32_t>> prompts;
  for (const char* s : {"def parse_args(", "import os\n\nclass ", "for i in range(", "    return ",
                        "<|im_start|>user\nWrite a function that adds two numbers.<|im_end|>\n<|im_start|>assistant\n"})
    prompts.push_back(tok.encode(s));
  Counts r;
  gate(t, d, prompts, WType::BF16, r);
  if (HasFatalFailure()) return;
  EXPECT_EQ(2 * 2 * 5 * 3 * 4, r.runs);
  // A trained draft over an f32 draft cache is still accepted far above chance (1/4032).
  EXPECT_GT(double(r.accepted) / double(r.drafted), 0.03);
}

TEST(KVCacheGate, RandomPairWithQuantizedCaches) {
  const std::string t = kSrc + "/tests/data/random_pair/target", d = kSrc + "/tests/data/random_pair/draft";
  std::vector<std::vector<int32_t>> prompts;
  for (int p = 0; p < 5; ++p) {
    std::vector<int32_t> ids;
    for (int i = 0; i < 5 + 7 * p; ++i) ids.push_back(int32_t((p * 131 + i * 17 + 3) % 370));
    prompts.push_back(ids);
  }
  Counts r;
  gate(t, d, prompts, WType::Q4_0, r);
  if (HasFatalFailure()) return;
  EXPECT_EQ(2 * 2 * 5 * 3 * 4, r.runs);
}
