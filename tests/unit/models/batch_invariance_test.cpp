// A position's logits are bitwise identical whether computed in single-token decode, inside
// a 5-token batch, or inside a large prefill chunk; for every weight format and thread count.
// Speculative decoding's losslessness rests on this.
#include <gtest/gtest.h>

#include <cstring>
#include <vector>

#include "models/dense/arch_spec.h"
#include "models/dense/dense_model.h"
#include "util/error.h"

using namespace dflash;

namespace {

ModelConfig tiny_config(const char* arch) {
  ModelConfig c;
  c.arch = find_arch_by_hf_name(arch);
  c.architecture = arch;
  c.hidden = 128, c.n_layers = 2, c.n_heads = 4, c.n_kv_heads = 2, c.head_dim = 32, c.ffn = 256, c.vocab = 320;
  c.qkv_bias = c.arch->qkv_bias;
  c.rope_theta = 10000;
  return c;
}

// Logits of all n positions, computing them in pieces of `piece` rows.
std::vector<float> run(const TargetModel& m, const std::vector<int32_t>& ids, int piece) {
  const int n = int(ids.size()), V = m.config().vocab;
  auto cache = m.new_state(n);
  std::vector<float> out(size_t(n) * V);
  for (int pos = 0; pos < n; pos += piece) {
    ForwardArgs a;
    a.tokens = ids.data() + pos;
    a.n = std::min(piece, n - pos);
    a.logits_from = 0;
    a.logits = out.data() + size_t(pos) * V;
    m.forward(*cache, a);
  }
  return out;
}

}  // namespace

TEST(BatchInvariance, DecodeVerifyAndPrefillGiveIdenticalBits) {
  std::vector<int32_t> ids(520);
  for (size_t i = 0; i < ids.size(); ++i) ids[i] = int32_t((i * 37 + 5) % 320);
  for (const char* arch : {"Qwen3ForCausalLM", "Qwen2ForCausalLM", "LlamaForCausalLM"}) {
    for (WType t : {WType::F32, WType::F16, WType::BF16, WType::Q8_0, WType::Q4_0}) {
      // The same weights on one and on two threads: results must not depend on the split.
      auto m = DenseModel::random(tiny_config(arch), t, 42, make_cpu_backend(2));
      auto m1 = DenseModel::random(tiny_config(arch), t, 42, make_cpu_backend(1));
      const auto prefill = run(*m, ids, 512);
      const auto verify = run(*m, ids, 5);
      const auto decode = run(*m1, ids, 1);
      const auto odd = run(*m1, ids, 7);
      ASSERT_EQ(0, std::memcmp(prefill.data(), decode.data(), sizeof(float) * prefill.size())) << arch << " " << wtype_name(t);
      ASSERT_EQ(0, std::memcmp(prefill.data(), verify.data(), sizeof(float) * prefill.size())) << arch << " " << wtype_name(t);
      ASSERT_EQ(0, std::memcmp(prefill.data(), odd.data(), sizeof(float) * prefill.size())) << arch << " " << wtype_name(t);
    }
  }
}

TEST(BatchInvariance, RollbackAndRecomputeGivesIdenticalBits) {
  auto m = DenseModel::random(tiny_config("Qwen3ForCausalLM"), WType::Q4_0, 7);
  const int V = m->config().vocab;
  std::vector<int32_t> ids = {1, 2, 3, 4, 5, 6, 7, 8};
  auto cache = m->new_state(32);
  std::vector<float> a(size_t(8) * V), b(size_t(3) * V);
  ForwardArgs fa;
  fa.tokens = ids.data();
  fa.n = 8;
  fa.logits_from = 0;
  fa.logits = a.data();
  m->forward(*cache, fa);
  cache->rollback(5);  // as after a rejected draft: positions 5.. are recomputed
  ForwardArgs fb;
  fb.tokens = ids.data() + 5;
  fb.n = 3;
  fb.logits_from = 0;
  fb.logits = b.data();
  m->forward(*cache, fb);
  ASSERT_EQ(8, cache->length());
  ASSERT_EQ(0, std::memcmp(a.data() + size_t(5) * V, b.data(), sizeof(float) * b.size()));
}

// Several sequences in one forward pass (the server's batched steps): each sequence's logits
// and taps are bitwise what it gets alone, whatever the mix of prefill, verify and decode rows
// beside it, and a sequence's state can be rolled back after a batched pass.
TEST(BatchInvariance, SequencesBatchedTogetherGiveTheirOwnBits) {
  for (WType t : {WType::BF16, WType::Q8_0}) {
    auto m = DenseModel::random(tiny_config("Qwen3ForCausalLM"), t, 11, make_cpu_backend(2));
    const int V = m->config().vocab, H = m->config().hidden;
    const std::vector<int> taps_of = {0, 1};
    // Three sequences with different histories, then one batched pass of 6, 1 and 4 rows.
    std::vector<std::vector<int32_t>> hist = {{3, 9, 27}, {5, 7, 11, 13, 17, 19, 23}, {2}};
    std::vector<std::vector<int32_t>> rows = {{30, 31, 32, 33, 34, 35}, {40}, {50, 51, 52, 53}};
    std::vector<std::unique_ptr<SequenceState>> alone, batched;
    for (size_t s = 0; s < hist.size(); ++s) {
      for (auto* v : {&alone, &batched}) {
        v->push_back(m->new_state(64));
        ForwardArgs a;
        a.tokens = hist[s].data();
        a.n = int(hist[s].size());
        a.logits_from = a.n;  // none
        m->forward(*v->back(), a);
      }
    }
    std::vector<std::vector<float>> la(3), lb(3), ta(3), tb(3);
    std::vector<SequenceRows> batch;
    for (size_t s = 0; s < rows.size(); ++s) {
      const int n = int(rows[s].size());
      for (auto* l : {&la, &lb}) (*l)[s].assign(size_t(n) * V, 0.0f);
      for (auto* tp : {&ta, &tb}) (*tp)[s].assign(size_t(n) * taps_of.size() * H, 0.0f);
      ForwardArgs a;
      a.tokens = rows[s].data();
      a.n = n;
      a.logits_from = 0;
      a.capture_layers = &taps_of;
      a.logits = la[s].data();
      a.capture = ta[s].data();
      m->forward(*alone[s], a);
      a.logits = lb[s].data();
      a.capture = tb[s].data();
      batch.push_back({batched[s].get(), a});
    }
    m->forward_batch(batch);
    for (size_t s = 0; s < rows.size(); ++s) {
      ASSERT_EQ(alone[s]->length(), batched[s]->length());
      ASSERT_EQ(0, std::memcmp(la[s].data(), lb[s].data(), sizeof(float) * la[s].size())) << wtype_name(t) << " seq " << s;
      ASSERT_EQ(0, std::memcmp(ta[s].data(), tb[s].data(), sizeof(float) * ta[s].size())) << wtype_name(t) << " seq " << s;
    }
    // Roll the first sequence back into its batched rows and recompute one alone.
    batched[0]->rollback(int(hist[0].size()) + 2);
    std::vector<float> again(static_cast<size_t>(V));
    ForwardArgs a;
    a.tokens = rows[0].data() + 2;
    a.n = 1;
    a.logits = again.data();
    m->forward(*batched[0], a);
    ASSERT_EQ(0, std::memcmp(again.data(), la[0].data() + size_t(2) * V, sizeof(float) * V)) << wtype_name(t);
  }
}

TEST(BatchInvariance, ABatchIsCheckedBeforeAnyStateChanges) {
  auto m = DenseModel::random(tiny_config("Qwen3ForCausalLM"), WType::BF16, 11, make_cpu_backend(1));
  auto small = m->new_state(2), big = m->new_state(16);
  const std::vector<int32_t> ids = {1, 2, 3};
  ForwardArgs a;
  a.tokens = ids.data();
  a.n = 3;
  a.logits_from = 3;
  std::vector<SequenceRows> batch = {{big.get(), a}, {small.get(), a}};
  EXPECT_THROW(m->forward_batch(batch), Error);  // the second one does not fit
  EXPECT_EQ(0, big->length());
  batch = {{big.get(), a}, {big.get(), a}};
  EXPECT_THROW(m->forward_batch(batch), Error);  // the same sequence twice
  EXPECT_EQ(0, big->length());
}
