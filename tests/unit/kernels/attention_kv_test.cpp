// The tiled attention kernel against its plain reference twin for f32, f16, Q8_0 and Q4_0 KV
// caches, and the bitwise batch invariance the speculative loop rests on: a query row's
// output does not depend on the rows computed beside it, on the thread count, or on whether
// its keys were split across threads.
#include <gtest/gtest.h>

#include <cmath>
#include <cstdio>
#include <cstring>
#include <random>
#include <string>
#include <vector>

#include "kernels/kernels.h"
#include "simd_targets.h"

using namespace dflash;

namespace {

std::vector<float> randn(size_t n, uint64_t seed, float scale = 1.0f) {
  std::mt19937_64 rng(seed);
  std::normal_distribution<float> nd(0.0f, scale);
  std::vector<float> v(n);
  for (auto& x : v) x = nd(rng);
  return v;
}

// A cache [n_kv][cap] of rows in format t, filled from random fp32 values row by row.
std::vector<uint8_t> make_cache(WType t, int n_kv, int cap, int hd, uint64_t seed) {
  const auto f = randn(size_t(n_kv) * cap * hd, seed);
  const size_t rb = row_bytes(t, hd);
  std::vector<uint8_t> out(size_t(n_kv) * cap * rb);
  for (size_t r = 0; r < size_t(n_kv) * cap; ++r) quantize_row(f.data() + r * hd, hd, t, out.data() + r * rb);
  return out;
}

struct Case {
  WType t;
  int group, hd, cap, nq, pos0;  // rows i attend causally to [0, pos0 + i + 1)
};

std::string name(const Case& c) {
  return std::string(wtype_name(c.t)) + " group " + std::to_string(c.group) + " hd " + std::to_string(c.hd) +
         " pos0 " + std::to_string(c.pos0) + " nq " + std::to_string(c.nq);
}

struct Inputs {
  std::vector<float> q;
  std::vector<uint8_t> k, v;
  std::vector<int> kb, ke;
  AttentionArgs args(const Case& c, float* out) {
    const int n_kv = 2;
    return AttentionArgs{q.data(), c.nq, n_kv * c.group, n_kv, c.hd, k.data(), v.data(), c.cap,
                         kb.data(), ke.data(), 1.0f / std::sqrt(float(c.hd)), out, c.t};
  }
};

Inputs setup(const Case& c, uint64_t seed) {
  const int n_kv = 2, n_heads = n_kv * c.group;
  Inputs s;
  s.q = randn(size_t(c.nq) * n_heads * c.hd, seed);
  s.k = make_cache(c.t, n_kv, c.cap, c.hd, seed + 1);
  s.v = make_cache(c.t, n_kv, c.cap, c.hd, seed + 2);
  s.kb.assign(size_t(c.nq), 0);
  s.ke.resize(size_t(c.nq));
  for (int i = 0; i < c.nq; ++i) s.ke[size_t(i)] = c.pos0 + i + 1;
  if (c.nq > 3) s.kb[2] = std::min(s.ke[2] - 1, 300);  // a window not starting at 0 (sliding-window layers)
  return s;
}

std::vector<Case> cases() {
  std::vector<Case> out;
  for (WType t : {WType::F32, WType::F16, WType::Q8_0, WType::Q4_0})
    for (int group : {1, 2, 4})
      for (int hd : {64, 128}) {
        out.push_back({t, group, hd, 120, 7, 37});    // one chunk, odd lengths
        out.push_back({t, group, hd, 700, 11, 517});  // several chunks and tiles, odd ends
      }
  return out;
}

}  // namespace

// Fast and reference read the same decoded cache values (scale times code, one rounding) and,
// for Q8_0/Q4_0 keys, compute the same scores (exact integer block sums, the same fma chain),
// so they differ only by the order of fp32 additions and the SIMD exp (a few ulps): outputs are
// weighted means of values of magnitude ~1; the largest difference seen is 1e-6, and 4e-6
// absolute (about 30 ulps at 1.0) leaves room for other SIMD widths.
TEST(AttentionKV, FastMatchesReferenceForEveryCacheType) {
  ThreadPool pool1(1), pool2(2);
  for (const Case& c : cases()) {
    Inputs s = setup(c, 1000 + c.hd + c.group);
    const size_t n = size_t(c.nq) * 2 * c.group * c.hd;
    std::vector<float> of1(n), of2(n), orf(n);
    attention(s.args(c, of1.data()), &pool1);
    attention(s.args(c, of2.data()), &pool2);
    ref::attention(s.args(c, orf.data()));
    double worst = 0;
    for (size_t i = 0; i < n; ++i) {
      ASSERT_TRUE(std::isfinite(of1[i])) << name(c);
      worst = std::max(worst, double(std::fabs(of1[i] - orf[i])));
    }
    EXPECT_LT(worst, 4e-6) << name(c);
    ASSERT_EQ(0, std::memcmp(of1.data(), of2.data(), sizeof(float) * n)) << "thread count changed bits: " << name(c);
  }
}

TEST(AttentionKV, RowResultDoesNotDependOnBatchThreadsOrSplit) {
  ThreadPool pool1(1), pool2(2), pool3(3);
  for (const Case& c : cases()) {
    Inputs s = setup(c, 2000 + c.hd * 3 + c.group);
    const int nh = 2 * c.group, row = nh * c.hd;
    std::vector<float> all(size_t(c.nq) * row);
    attention(s.args(c, all.data()), &pool2);
    for (int i = 0; i < c.nq; ++i) {
      // Alone, as in decode. The 2 kv heads are 2 tasks: two threads take one each, whole;
      // three threads get the row's keys split by chunk across tasks.
      for (ThreadPool* p : {&pool1, &pool2, &pool3}) {
        std::vector<float> one(static_cast<size_t>(row));
        AttentionArgs a = s.args(c, one.data());
        a.q += size_t(i) * row;
        a.n_q = 1;
        a.kbeg += i;
        a.kend += i;
        attention(a, p);
        ASSERT_EQ(0, std::memcmp(one.data(), all.data() + size_t(i) * row, sizeof(float) * row))
            << name(c) << " row " << i << " threads " << p->size();
      }
    }
    // A suffix of the batch, as in a verify after a partial prefill.
    const int from = c.nq / 2;
    std::vector<float> tail(size_t(c.nq - from) * row);
    AttentionArgs a = s.args(c, tail.data());
    a.q += size_t(from) * row;
    a.n_q = c.nq - from;
    a.kbeg += from;
    a.kend += from;
    attention(a, &pool1);
    ASSERT_EQ(0, std::memcmp(tail.data(), all.data() + size_t(from) * row, sizeof(float) * tail.size())) << name(c);
  }
}

// The dispatcher picks one target; force each one this CPU can run, so the integer scores of
// Q8_0/Q4_0 keys are checked both through VNNI (AVX3_DL) and through the fp32 arithmetic on
// codes the other targets use, including a group of 7 query heads (Qwen2.5-0.5B) and a head
// size that is not a multiple of 64.
TEST(AttentionKV, EverySimdTargetOfThisCpuMatchesTheReference) {
  ThreadPool pool2(2);
  const auto tried = test::for_each_simd_target([&](const std::string& target) {
    for (WType t : {WType::F32, WType::F16, WType::Q8_0, WType::Q4_0})
      for (int group : {1, 7})
        for (int hd : {64, 96, 128})
          for (const Case& c : {Case{t, group, hd, 120, 7, 37}, Case{t, group, hd, 700, 17, 517},
                                Case{t, group, hd, 700, 1, 650}}) {  // a decode row: f16 read in registers
            Inputs s = setup(c, 3000 + hd + group);
            const size_t n = size_t(c.nq) * 2 * c.group * c.hd;
            std::vector<float> of(n), orf(n);
            attention(s.args(c, of.data()), &pool2);
            ref::attention(s.args(c, orf.data()));
            double worst = 0;
            for (size_t i = 0; i < n; ++i) worst = std::max(worst, double(std::fabs(of[i] - orf[i])));
            ASSERT_LT(worst, 4e-6) << name(c) << " on " << target;
          }
  });
  std::printf("attention checked on: %s\n", test::joined(tried).c_str());
  EXPECT_GE(tried.size(), 1u);
}

// Long single rows (4,000+ keys) are the decode case that splits keys across threads when the
// kv heads do not share out evenly (2 heads, 3 threads); the merged result must equal the
// unsplit one bit for bit and stay close to the reference.
TEST(AttentionKV, LongDecodeRowSplitAcrossThreadsIsExact) {
  ThreadPool pool1(1), pool2(2), pool3(3);
  for (WType t : {WType::F32, WType::F16, WType::Q8_0, WType::Q4_0})
    for (int group : {1, 7}) {
      const Case c{t, group, 64, 4200, 1, 4150};
      Inputs s = setup(c, 77 + group);
      const size_t n = size_t(2) * group * c.hd;
      std::vector<float> o1(n), o2(n), o3(n), orf(n);
      attention(s.args(c, o1.data()), &pool1);
      attention(s.args(c, o2.data()), &pool2);
      attention(s.args(c, o3.data()), &pool3);
      ref::attention(s.args(c, orf.data()));
      ASSERT_EQ(0, std::memcmp(o1.data(), o2.data(), sizeof(float) * n)) << name(c);
      ASSERT_EQ(0, std::memcmp(o1.data(), o3.data(), sizeof(float) * n)) << name(c);
      for (size_t i = 0; i < n; ++i) ASSERT_NEAR(o1[i], orf[i], 4e-6) << name(c) << " " << i;
    }
}

TEST(AttentionKV, EmptyKeyRangeGivesZeros) {
  const Case c{WType::Q4_0, 2, 64, 64, 3, 10};
  Inputs s = setup(c, 5);
  s.kb[1] = s.ke[1];  // row 1 sees no key
  std::vector<float> o(size_t(3) * 4 * 64, 1.0f);
  attention(s.args(c, o.data()), nullptr);
  for (int d = 0; d < 4 * 64; ++d) ASSERT_EQ(0.0f, o[size_t(4 * 64 + d)]);
  for (int d = 0; d < 4 * 64; ++d) ASSERT_NE(0.0f, o[size_t(d)]);
}
