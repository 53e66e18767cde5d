// A position's logits are bitwise identical whether computed in single-token decode, inside
// a 5-token batch, or inside a large prefill chunk; for every weight format and thread count.
// Speculative decoding's losslessness rests on this.
#include <gtest/gtest.h>

#include <cstring>
#include <vector>

#include "models/arch/arch_spec.h"
#include "models/transformer.h"

using namespace dflash;

namespace {

ModelConfig tiny_config(const char* arch) {
  ModelConfig c;
  c.arch = find_arch_by_hf_name(arch);
  c.architecture = arch;
  c.hidden = 128, c.n_layers = 2, c.n_heads = 4, c.n_kv_heads = 2, c.head_dim = 32, c.ffn = 256, c.vocab = 320;
  c.attention_bias = c.arch->qkv_bias;
  c.rope_theta = 10000;
  return c;
}

// Logits of all n positions, computing them in pieces of `piece` rows.
std::vector<float> run(const Transformer& m, const std::vector<int32_t>& ids, int piece, ThreadPool* pool) {
  const int n = int(ids.size()), V = m.config().vocab;
  KVCache cache = m.make_cache(n);
  std::vector<float> out(size_t(n) * V);
  for (int pos = 0; pos < n; pos += piece) {
    ForwardArgs a;
    a.tokens = ids.data() + pos;
    a.n = std::min(piece, n - pos);
    a.logits_from = 0;
    a.logits = out.data() + size_t(pos) * V;
    m.forward(cache, a, pool);
  }
  return out;
}

}  // namespace

TEST(BatchInvariance, DecodeVerifyAndPrefillGiveIdenticalBits) {
  ThreadPool pool1(1), pool2(2);
  std::vector<int32_t> ids(520);
  for (size_t i = 0; i < ids.size(); ++i) ids[i] = int32_t((i * 37 + 5) % 320);
  for (const char* arch : {"Qwen3ForCausalLM", "Qwen2ForCausalLM", "LlamaForCausalLM"}) {
    for (WType t : {WType::F32, WType::F16, WType::BF16, WType::Q8_0, WType::Q4_0}) {
      auto m = Transformer::random(tiny_config(arch), t, 42);
      const auto prefill = run(*m, ids, 512, &pool2);
      const auto verify = run(*m, ids, 5, &pool2);
      const auto decode = run(*m, ids, 1, &pool1);
      const auto odd = run(*m, ids, 7, &pool1);
      ASSERT_EQ(0, std::memcmp(prefill.data(), decode.data(), sizeof(float) * prefill.size())) << arch << " " << wtype_name(t);
      ASSERT_EQ(0, std::memcmp(prefill.data(), verify.data(), sizeof(float) * prefill.size())) << arch << " " << wtype_name(t);
      ASSERT_EQ(0, std::memcmp(prefill.data(), odd.data(), sizeof(float) * prefill.size())) << arch << " " << wtype_name(t);
    }
  }
}

TEST(BatchInvariance, RollbackAndRecomputeGivesIdenticalBits) {
  ThreadPool pool(2);
  auto m = Transformer::random(tiny_config("Qwen3ForCausalLM"), WType::Q4_0, 7);
  const int V = m->config().vocab;
  std::vector<int32_t> ids = {1, 2, 3, 4, 5, 6, 7, 8};
  KVCache cache = m->make_cache(32);
  std::vector<float> a(size_t(8) * V), b(size_t(3) * V);
  ForwardArgs fa;
  fa.tokens = ids.data();
  fa.n = 8;
  fa.logits_from = 0;
  fa.logits = a.data();
  m->forward(cache, fa, &pool);
  cache.rollback(5);  // as after a rejected draft: positions 5.. are recomputed
  ForwardArgs fb;
  fb.tokens = ids.data() + 5;
  fb.n = 3;
  fb.logits_from = 0;
  fb.logits = b.data();
  m->forward(cache, fb, &pool);
  ASSERT_EQ(8, cache.length());
  ASSERT_EQ(0, std::memcmp(a.data() + size_t(5) * V, b.data(), sizeof(float) * b.size()));
}
