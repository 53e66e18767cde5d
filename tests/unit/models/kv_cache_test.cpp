// The quantized KV cache: its real size, rollback, bitwise batch invariance with every cache
// format, and how far q8/q4 cache logits move from f32 cache logits on the random test model.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstring>
#include <string>
#include <vector>

#include "models/dense/arch_spec.h"
#include "models/kv_cache.h"
#include "models/dense/dense_model.h"
#include "util/error.h"

using namespace dflash;

namespace {

const std::string kSrc = DFLASH_SOURCE_DIR;
const WType kCacheTypes[] = {WType::F32, WType::F16, WType::Q8_0, WType::Q4_0};

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

TEST(KVCache, BytesAreTheAllocatedSizeOfEachFormat) {
  const int layers = 3, kvh = 2, hd = 64, cap = 100;
  const size_t rows = size_t(2) * layers * kvh * cap;  // keys and values
  EXPECT_EQ(rows * hd * 4, KVCache(layers, kvh, hd, cap, WType::F32).bytes());
  EXPECT_EQ(rows * (hd / 32) * 34, KVCache(layers, kvh, hd, cap, WType::Q8_0).bytes());
  EXPECT_EQ(rows * (hd / 32) * 18, KVCache(layers, kvh, hd, cap, WType::Q4_0).bytes());
  EXPECT_THROW(KVCache(layers, kvh, 48, cap, WType::Q8_0), Error);  // head_dim not a multiple of 32
  EXPECT_THROW(KVCache(layers, kvh, hd, cap, WType::BF16), Error);
  EXPECT_EQ(WType::Q4_0, parse_kv_type("q4"));
  EXPECT_EQ(WType::Q8_0, parse_kv_type("q8_0"));
  EXPECT_THROW(parse_kv_type("q5"), Error);
}

TEST(KVCache, StoredRowsDecodeWithinTheFormatsError) {
  const int hd = 64;
  KVCache c(1, 2, hd, 8, WType::Q8_0);
  std::vector<float> k(size_t(3) * 2 * hd), v(k.size());
  for (size_t i = 0; i < k.size(); ++i) k[i] = std::sin(float(i)), v[i] = std::cos(float(i) * 0.7f);
  c.store(0, k.data(), v.data(), 4, 3);
  // Row (position 5, kv head 1) holds input row 1, head 1, quantized on its own.
  const uint8_t* row = c.k(0) + (size_t(1) * 8 + 5) * c.row_bytes();
  const float* src = k.data() + size_t(1) * 2 * hd + hd;
  for (int b = 0; b < hd / 32; ++b) {
    const auto* blk = reinterpret_cast<const BlockQ8_0*>(row) + b;
    float amax = 0;
    for (int i = 0; i < 32; ++i) amax = std::max(amax, std::fabs(src[b * 32 + i]));
    for (int i = 0; i < 32; ++i) {
      const float d = amax / 127.0f;  // the scale before its fp16 rounding
      ASSERT_NEAR(src[b * 32 + i], float(blk->qs[i]) * d, 0.51f * d + amax * 1e-3f);
    }
  }
}

TEST(KVCache, QuantizedCachesKeepDecodeVerifyAndPrefillBitwiseIdentical) {
  std::vector<int32_t> ids(300);
  for (size_t i = 0; i < ids.size(); ++i) ids[i] = int32_t((i * 37 + 5) % 320);
  for (const char* arch : {"Qwen3ForCausalLM", "LlamaForCausalLM"})
    for (WType ct : kCacheTypes) {
      // The same weights on one and on two threads: results must not depend on the split.
      auto m = DenseModel::random(tiny_config(arch), WType::Q8_0, 42, make_cpu_backend(2));
      auto m1 = DenseModel::random(tiny_config(arch), WType::Q8_0, 42, make_cpu_backend(1));
      m->set_cache_type(ct);
      m1->set_cache_type(ct);
      const auto prefill = run(*m, ids, 300);
      const auto verify = run(*m, ids, 5);
      const auto decode = run(*m1, ids, 1);
      ASSERT_EQ(0, std::memcmp(prefill.data(), decode.data(), sizeof(float) * prefill.size())) << arch << " " << wtype_name(ct);
      ASSERT_EQ(0, std::memcmp(prefill.data(), verify.data(), sizeof(float) * prefill.size())) << arch << " " << wtype_name(ct);
    }
}

TEST(KVCache, RollbackAndRecomputeGivesIdenticalBitsInEveryFormat) {
  for (WType ct : kCacheTypes) {
    auto m = DenseModel::random(tiny_config("Qwen3ForCausalLM"), WType::Q4_0, 7);
    m->set_cache_type(ct);
    const int V = m->config().vocab;
    std::vector<int32_t> ids = {1, 2, 3, 4, 5, 6, 7, 8}, other = {9, 10, 11};
    auto cache = m->new_state(32);
    ASSERT_EQ(ct, static_cast<KVCache&>(*cache).type());
    std::vector<float> a(size_t(8) * V), b(size_t(3) * V), junk(size_t(3) * V);
    ForwardArgs fa;
    fa.tokens = ids.data();
    fa.n = 8;
    fa.logits_from = 0;
    fa.logits = a.data();
    m->forward(*cache, fa);
    // A rejected draft: other tokens at positions 5..7, then rolled back and recomputed.
    cache->rollback(5);
    ForwardArgs fj = fa;
    fj.tokens = other.data();
    fj.n = 3;
    fj.logits = junk.data();
    m->forward(*cache, fj);
    cache->rollback(5);
    ForwardArgs fb = fa;
    fb.tokens = ids.data() + 5;
    fb.n = 3;
    fb.logits = b.data();
    m->forward(*cache, fb);
    ASSERT_EQ(8, cache->length());
    ASSERT_EQ(0, std::memcmp(a.data() + size_t(5) * V, b.data(), sizeof(float) * b.size())) << wtype_name(ct);
  }
}

// q8 and q4 caches change attention inputs by their rounding error (~0.4% and ~7% of each
// block's largest value), so logits move. On the random test model over 200 positions,
// relative to the spread (standard deviation, 0.59) of the f32-cache logits, measured:
// q8 worst 4.8%, q4 worst 60% (its logits are nearly flat, so one 0.35 move is most of a
// standard deviation); bounds are twice that. RMS differences and greedy agreement are
// bounded too (measured rms q8 0.55%, q4 8.2%, bounds twice that; greedy choice agrees at
// 199/200 (q8) and 191/200 (q4) positions).
TEST(KVCache, QuantizedCacheLogitsStayCloseToF32CacheLogits) {
  const std::string dir = kSrc + "/tests/data/random_pair/target";
  LoadOptions lo;
  auto m = DenseModel::load(dir, lo);
  const int V = m->config().vocab, n = 200;
  std::vector<int32_t> ids(static_cast<size_t>(n));
  for (int i = 0; i < n; ++i) ids[size_t(i)] = int32_t((i * 131 + 17) % V);
  m->set_cache_type(WType::F32);
  const auto ref = run(*m, ids, 64);
  double mean = 0, var = 0;
  for (float x : ref) mean += x;
  mean /= double(ref.size());
  for (float x : ref) var += (x - mean) * (x - mean);
  const double sd = std::sqrt(var / double(ref.size()));
  for (WType ct : {WType::F16, WType::Q8_0, WType::Q4_0}) {
    m->set_cache_type(ct);
    const auto got = run(*m, ids, 64);
    double worst = 0, sq = 0;
    int same_argmax = 0;
    for (int i = 0; i < n; ++i) {
      const float* r = ref.data() + size_t(i) * V;
      const float* g = got.data() + size_t(i) * V;
      for (int j = 0; j < V; ++j) {
        worst = std::max(worst, double(std::fabs(r[j] - g[j])));
        sq += double(r[j] - g[j]) * double(r[j] - g[j]);
      }
      same_argmax += std::max_element(r, r + V) - r == std::max_element(g, g + V) - g;
    }
    const double rel = worst / sd, rms = std::sqrt(sq / double(ref.size())) / sd;
    std::printf("%s cache: worst |logit - f32 logit| = %.4f (%.2f%% of the logits' sd %.3f), rms %.2f%%, "
                "argmax agrees %d/%d\n",
                wtype_name(ct), worst, 100 * rel, sd, 100 * rms, same_argmax, n);
    EXPECT_LT(rel, ct == WType::Q8_0 ? 0.10 : 1.2) << wtype_name(ct);
    EXPECT_LT(rms, ct == WType::Q8_0 ? 0.011 : 0.16) << wtype_name(ct);
    EXPECT_GE(same_argmax, ct == WType::Q8_0 ? n - 3 : n * 9 / 10) << wtype_name(ct);
    EXPECT_GT(worst, 0.0) << "a quantized cache cannot be bit-exact with f32";
  }
}
