// The int8 matmul path (Q8_0, Q4_0, Q4_K, Q6_K weights x activations quantized to int8
// blocks of 32): the fast kernel is bitwise equal to its reference twin at every batch size
// and thread count, a row's result does not depend on the batch, the k-quant layouts decode
// as GGUF defines them, and the integer path stays within the activation-quantization error
// of fp32 x dequantized weights.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstring>
#include <cstdio>
#include <random>
#include <set>
#include <string>
#include <vector>

#include "kernels/cpu/quant_act.h"
#include "kernels/kernels.h"
#include "kernels/numeric.h"
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

const WType kIntTypes[] = {WType::Q8_0, WType::Q4_0, WType::Q4_K, WType::Q6_K};

// The matrix as stored and, for Q8_0/Q4_0, its interleaved copy: both must give the same bits.
std::vector<WeightMatrix> layouts(const WeightMatrix& w) {
  if (!packable(w)) return {w};
  return {w, pack_weight_matrix(w)};
}

std::string layout_name(const WeightMatrix& w) { return std::string(wtype_name(w.type)) + (w.packed ? " packed" : ""); }

std::vector<int> shapes_k(WType t) {
  if (t == WType::Q4_K || t == WType::Q6_K) return {256, 768};
  return {32, 96, 288, 896};  // 1, 3, 9 and 28 blocks: partial groups of 8 included
}

}  // namespace

TEST(QuantActs, FastMatchesReferenceBitwise) {
  for (int K : {32, 96, 256, 896}) {
    const int M = 5;
    auto x = randn(size_t(M) * K, 40 + K, 3.0f);
    // Edge cases: an all-zero block, exact halves of a step (ties), a lone large value.
    for (int i = 0; i < 32; ++i) x[size_t(i)] = 0.0f;
    if (K >= 64) {
      x[32] = 127.0f;
      for (int i = 33; i < 64; ++i) x[size_t(i)] = float(i - 48) + 0.5f;
    }
    QuantActs f, r;
    quantize_acts(x.data(), M, K, f);
    ref::quantize_acts(x.data(), M, K, r);
    ASSERT_EQ(f.Kp, r.Kp);
    ASSERT_EQ(f.q, r.q) << K;
    ASSERT_EQ(0, std::memcmp(f.d.data(), r.d.data(), f.d.size() * sizeof(float))) << K;
    ASSERT_EQ(f.s, r.s) << K;
    ASSERT_EQ(f.s16, r.s16) << K;
    // The quantized row reconstructs x within half a step per element.
    for (int m = 0; m < M; ++m)
      for (int k = 0; k < K; ++k) {
        const float d = r.drow(m)[k / 32];
        ASSERT_LE(std::fabs(float(r.qrow(m)[k]) * d - x[size_t(m) * K + k]), 0.5f * d * 1.0001f + 1e-30f);
      }
    if (K >= 64) {  // block 1 has max 127, so a step of 1: ties round to even
      ASSERT_EQ(r.qrow(0)[62], int8_t(14));  // 14.5
      ASSERT_EQ(r.qrow(0)[63], int8_t(16));  // 15.5
      ASSERT_EQ(r.qrow(0)[47], int8_t(0));   // -0.5
      ASSERT_EQ(r.qrow(0)[49], int8_t(2));   // 1.5
      ASSERT_EQ(r.qrow(0)[33], int8_t(-14)); // -14.5
      ASSERT_EQ(r.qrow(0)[32], int8_t(127));
    }
  }
}

TEST(QMatmul, FastEqualsReferenceBitwiseForEveryBatchAndThreadCount) {
  ThreadPool pool1(1), pool2(2);
  for (WType t : kIntTypes) {
    for (int K : shapes_k(t)) {
      for (int N : {37, 131}) {
        auto wf = randn(size_t(N) * K, 1 + K + N);
        const WeightMatrix w0 = make_weight_matrix(wf.data(), N, K, t);
        auto x = randn(size_t(33) * K, 100 + K);
        for (const WeightMatrix& w : layouts(w0))
        for (int M = 1; M <= 33; ++M) {
          std::vector<float> yr(size_t(M) * N), y1(yr.size()), y2(yr.size());
          ref::matmul(x.data(), M, w, yr.data());
          matmul(x.data(), M, w, y1.data(), &pool1);
          matmul(x.data(), M, w, y2.data(), &pool2);
          ASSERT_EQ(0, std::memcmp(yr.data(), y1.data(), yr.size() * sizeof(float)))
              << layout_name(w) << " K=" << K << " N=" << N << " M=" << M << " 1 thread";
          ASSERT_EQ(0, std::memcmp(yr.data(), y2.data(), yr.size() * sizeof(float)))
              << layout_name(w) << " K=" << K << " N=" << N << " M=" << M << " 2 threads";
        }
      }
    }
  }
}

TEST(QMatmul, LargeProductTakesThreadedPathAndStillMatches) {
  // Above the size at which the work is split over the pool (and the activation rows are
  // quantized in parallel); odd row count so the last chunk is ragged.
  ThreadPool pool2(2);
  for (WType t : kIntTypes) {
    const int K = 1024, N = 517, M = 33;
    auto wf = randn(size_t(N) * K, 5);
    WeightMatrix w = make_weight_matrix(wf.data(), N, K, t);
    auto x = randn(size_t(M) * K, 6);
    std::vector<float> yr(size_t(M) * N), yf(yr.size());
    ref::matmul(x.data(), M, w, yr.data());
    for (const WeightMatrix& wl : layouts(w)) {
      std::fill(yf.begin(), yf.end(), -1.0f);
      matmul(x.data(), M, wl, yf.data(), &pool2);
      ASSERT_EQ(0, std::memcmp(yr.data(), yf.data(), yr.size() * sizeof(float))) << layout_name(wl);
    }
    // Any split of the rows gives the same bits.
    QuantActs a;
    quantize_acts(x.data(), M, K, a);
    std::vector<float> ys(yr.size());
    for (int64_t n0 = 0; n0 < N; n0 += 77) qmatmul_range(a, M, w, ys.data(), n0, std::min<int64_t>(N, n0 + 77));
    ASSERT_EQ(0, std::memcmp(yr.data(), ys.data(), yr.size() * sizeof(float))) << wtype_name(t);
  }
}

TEST(QMatmul, MultiGivesEachProductsOwnBits) {
  // q/k/v-like and gate/up-like products of one x in one job: each output equals its own
  // matmul(), packed or not, small (one thread) or large (the pool).
  ThreadPool pool2(2), pool3(3);
  for (WType t : kIntTypes) {
    const int K = 512;
    for (int M : {1, 3, 40}) {
      for (ThreadPool* pool : {&pool2, &pool3}) {
        std::vector<WeightMatrix> ws;
        int seed = 70;
        for (int N : {200, 40, 72}) {
          auto wf = randn(size_t(N) * K, uint64_t(seed++));
          ws.push_back(layouts(make_weight_matrix(wf.data(), N, K, t)).back());
        }
        auto x = randn(size_t(M) * K, 80);
        std::vector<std::vector<float>> want(3), got(3);
        for (int i = 0; i < 3; ++i) {
          want[size_t(i)].resize(size_t(M) * size_t(ws[size_t(i)].rows));
          got[size_t(i)].assign(want[size_t(i)].size(), -1.0f);
          matmul(x.data(), M, ws[size_t(i)], want[size_t(i)].data(), nullptr);
        }
        matmul_multi(x.data(), M, {{&ws[0], got[0].data()}, {&ws[1], got[1].data()}, {&ws[2], got[2].data()}}, pool);
        for (int i = 0; i < 3; ++i)
          ASSERT_EQ(want[size_t(i)], got[size_t(i)])
              << layout_name(ws[size_t(i)]) << " M=" << M << " " << i << ", " << pool->size() << " threads";
      }
    }
  }
}

TEST(QMatmul, RowResultDoesNotDependOnBatch) {
  ThreadPool pool2(2);
  for (WType t : kIntTypes) {
    const int K = 768, N = 203, M = 40;
    auto wf = randn(size_t(N) * K, 17);
    for (const WeightMatrix& w : layouts(make_weight_matrix(wf.data(), N, K, t))) {
    auto x = randn(size_t(M) * K, 18);
    std::vector<float> big(size_t(M) * N);
    matmul(x.data(), M, w, big.data(), &pool2);
    for (int m = 0; m < M; ++m) {
      std::vector<float> one(static_cast<size_t>(N));
      matmul(x.data() + size_t(m) * K, 1, w, one.data(), nullptr);
      ASSERT_EQ(0, std::memcmp(one.data(), big.data() + size_t(m) * N, sizeof(float) * N)) << wtype_name(t) << " " << m;
    }
    for (int start : {3, 17}) {
      std::vector<float> five(size_t(5) * N);
      matmul(x.data() + size_t(start) * K, 5, w, five.data(), &pool2);
      ASSERT_EQ(0, std::memcmp(five.data(), big.data() + size_t(start) * N, sizeof(float) * 5 * N)) << layout_name(w);
    }
    }
  }
}

TEST(QMatmul, CloseToFloatTimesDequantizedWeights) {
  // The only difference from fp32 x dequantized weights is rounding x to 127 steps of its
  // block's max: at most half a step per element, so |err| <= sum_b d_b/2 * sum |w| (+ fp32).
  for (WType t : kIntTypes) {
    const int K = 512, N = 29, M = 3;
    auto wf = randn(size_t(N) * K, 21);
    WeightMatrix w = make_weight_matrix(wf.data(), N, K, t);
    auto x = randn(size_t(M) * K, 22);
    std::vector<float> y(size_t(M) * N), row(K);
    matmul(x.data(), M, w, y.data(), nullptr);
    QuantActs a;
    ref::quantize_acts(x.data(), M, K, a);
    double worst = 0;
    for (int n = 0; n < N; ++n) {
      dequantize_row(w, n, row.data());
      for (int m = 0; m < M; ++m) {
        double exact = 0, bound = 0, mag = 0;
        for (int k = 0; k < K; ++k) {
          exact += double(row[size_t(k)]) * x[size_t(m) * K + k];
          bound += 0.5 * a.drow(m)[k / 32] * std::fabs(row[size_t(k)]);
          mag += std::fabs(double(row[size_t(k)]) * x[size_t(m) * K + k]);
        }
        const double err = std::fabs(y[size_t(m) * N + n] - exact);
        ASSERT_LE(err, bound * 1.001 + 1e-5 * mag) << wtype_name(t) << " n=" << n << " m=" << m;
        worst = std::max(worst, err / mag);
      }
    }
    ASSERT_GT(worst, 0.0) << "the int8 path should not be exact fp32";
  }
}

TEST(PackedLayout, HoldsTheSameWeightsAndScales) {
  // Every weight and scale reads back the same from the interleaved copy, including a last
  // group of 16 that is only partly filled and an odd block count (a half-empty last pair).
  for (WType t : {WType::Q8_0, WType::Q4_0})
    for (int N : {1, 16, 37}) {
      const int K = 96;
      auto wf = randn(size_t(N) * K, 60 + N);
      const WeightMatrix w = make_weight_matrix(wf.data(), N, K, t);
      const WeightMatrix p = pack_weight_matrix(w);
      ASSERT_TRUE(p.packed);
      ASSERT_EQ(reinterpret_cast<uintptr_t>(p.data) % 64, 0u);
      const PackedGeometry pg = packed_geometry(t, N, K);
      EXPECT_EQ(p.bytes(), size_t((N + 63) / 64) * size_t(pg.set_bytes));
      EXPECT_EQ(pg.set_bytes, 4 * 2 * pg.pair_bytes);  // 3 blocks: two pairs per group
      std::vector<float> a(K), b(K);
      for (int n = 0; n < N; ++n) {
        for (int k = 0; k < K; ++k) ASSERT_EQ(quant_value(w, n, k), quant_value(p, n, k)) << n << " " << k;
        for (int blk = 0; blk < K / 32; ++blk) ASSERT_EQ(quant_scale(w, n, blk), quant_scale(p, n, blk));
        dequantize_row(w, n, a.data());
        dequantize_row(p, n, b.data());
        ASSERT_EQ(a, b);
      }
      // Chunk layout as documented: Q4_0 byte 4r + j of chunk c holds q(r, 4c + j) low and
      // q(r, 16 + 4c + j) high; Q8_0 byte 4r + j of chunk c holds q(r, 4c + j) + 128.
      const int r = std::min(N - 1, 5);
      const uint8_t* q = p.packed_quants(pg, 0, 1);
      if (t == WType::Q4_0) {
        EXPECT_EQ(q[64 * 2 + 4 * r + 3] & 15, quant_value(w, r, 32 + 11));
        EXPECT_EQ(q[64 * 2 + 4 * r + 3] >> 4, quant_value(w, r, 32 + 27));
      } else {
        EXPECT_EQ(int(q[64 * 6 + 4 * r + 1]) - 128, quant_value(w, r, 32 + 25));
      }
      EXPECT_FALSE(packable(p));
      EXPECT_FALSE(packable(make_weight_matrix(randn(256, 3).data(), 1, 256, WType::Q4_K)));
    }
}

TEST(KQuants, LayoutDecodesAsGgufDefinesIt) {
  // Q4_K: sub-block 5's scale has low bits in scales[9] (low nibble) and high bits in the top
  // of scales[1]; its min has low bits in scales[9] (high nibble) and high bits in scales[5].
  BlockQ4_K k4;
  std::memset(&k4, 0, sizeof(k4));
  k4.d = f32_to_f16(0.5f);
  k4.dmin = f32_to_f16(0.25f);
  k4.scales[1] = uint8_t(3 | (2 << 6));        // sc[1] = 3, top bits of sc[5] = 2
  k4.scales[5] = uint8_t(7 | (1 << 6));        // mn[1] = 7, top bits of mn[5] = 1
  k4.scales[9] = uint8_t(0x9 | (0x4 << 4));    // low nibbles of sc[5] = 9, mn[5] = 4
  k4.qs[32 * 0 + 4] = 0xb0 | 0x0;              // element 36 (sub-block 1, high nibble) = 11
  k4.qs[32 * 2 + 7] = 0x06;                    // element 135 (sub-block 4 low nibble) = 6
  k4.qs[32 * 2 + 8] = 0xd0;                    // element 168 (sub-block 5, high nibble) = 13
  int sc[8], mn[8];
  q4_k_scales(k4.scales, sc, mn);
  EXPECT_EQ(sc[1], 3);
  EXPECT_EQ(mn[1], 7);
  EXPECT_EQ(sc[5], 9 | (2 << 4));
  EXPECT_EQ(mn[5], 4 | (1 << 4));
  WeightMatrix w4{WType::Q4_K, 1, 256, reinterpret_cast<const uint8_t*>(&k4), nullptr};
  std::vector<float> v(256);
  dequantize_row(w4, 0, v.data());
  EXPECT_EQ(v[36], 0.5f * 3 * 11 - 0.25f * 7);
  EXPECT_EQ(v[168], 0.5f * 41 * 13 - 0.25f * 20);
  EXPECT_EQ(v[169], -0.25f * 20);
  EXPECT_EQ(v[135], 0.0f);  // sub-block 4 has scale 0 and min 0 here
  EXPECT_EQ(sizeof(BlockQ4_K), row_bytes(WType::Q4_K, 256));

  // Q6_K: element 128 + 64 + 3 (second half, g = 2) = low nibble... high nibble of ql[64 + 3],
  // bits 4-5 of qh[32 + 3]; scale index 195 / 16 = 12.
  BlockQ6_K k6;
  std::memset(&k6, 0, sizeof(k6));
  k6.d = f32_to_f16(2.0f);
  k6.scales[12] = -3;
  k6.ql[64 + 3] = 0x50;
  k6.qh[32 + 3] = uint8_t(2 << 4);
  WeightMatrix w6{WType::Q6_K, 1, 256, reinterpret_cast<const uint8_t*>(&k6), nullptr};
  dequantize_row(w6, 0, v.data());
  EXPECT_EQ(q6_k_value(k6, 195), (5 | (2 << 4)) - 32);
  EXPECT_EQ(v[195], 2.0f * -3 * float((5 | (2 << 4)) - 32));
  EXPECT_EQ(v[67], 0.0f);  // scales[4] = 0
  EXPECT_EQ(sizeof(BlockQ6_K), row_bytes(WType::Q6_K, 256));
  EXPECT_EQ(parse_wtype("q4_k"), WType::Q4_K);
  EXPECT_EQ(parse_wtype("q6_k"), WType::Q6_K);
  EXPECT_STREQ(wtype_name(WType::Q6_K), "q6_k");
}

TEST(KQuants, QuantizeRoundTripWithinStep) {
  for (WType t : {WType::Q4_K, WType::Q6_K}) {
    const int K = 512;
    auto wf = randn(K, 31);
    WeightMatrix w = make_weight_matrix(wf.data(), 1, K, t);
    std::vector<float> back(K);
    dequantize_row(w, 0, back.data());
    double err2 = 0, ref2 = 0;
    for (int s = 0; s < K / 32; ++s) {
      float lo = 0, hi = 0, amax = 0;
      for (int i = 0; i < 32; ++i) {
        const float v = wf[size_t(s * 32 + i)];
        lo = std::min(lo, v), hi = std::max(hi, v), amax = std::max(amax, std::fabs(v));
      }
      // A step of the sub-block's own grid plus the 6-bit/int8 rounding of its scale and min.
      const float bound = t == WType::Q4_K ? (hi - lo) / 15 * 1.6f + 0.04f * amax : amax / 31 * 1.6f;
      for (int i = 0; i < 32; ++i) {
        const float e = std::fabs(back[size_t(s * 32 + i)] - wf[size_t(s * 32 + i)]);
        ASSERT_LE(e, bound) << wtype_name(t) << " " << s * 32 + i;
        err2 += double(e) * e;
        ref2 += double(wf[size_t(s * 32 + i)]) * wf[size_t(s * 32 + i)];
      }
    }
    ASSERT_LT(std::sqrt(err2 / ref2), t == WType::Q4_K ? 0.12 : 0.03) << wtype_name(t);
  }
  EXPECT_THROW(make_weight_matrix(std::vector<float>(96).data(), 1, 96, WType::Q4_K), std::exception);
}

TEST(QMatmul, EverySimdTargetOfThisCpuGivesTheReferenceBits) {
  // The dispatcher picks one target; force each one this CPU can run (AVX3_DL's VNNI, AVX2's
  // maddubs, the portable code of SSE4 and below) so every integer path is checked.
  std::set<std::string> tried;  // the kernels' own distinct names: "SDOT+NEON" where SDOT takes the packed layout
  test::for_each_simd_target([&](const std::string&) {
    tried.insert(qmatmul_target_name());
    for (WType t : kIntTypes) {
      const int K = t == WType::Q4_K || t == WType::Q6_K ? 512 : 288, N = 41, M = 17;
      auto wf = randn(size_t(N) * K, 50);
      const WeightMatrix w0 = make_weight_matrix(wf.data(), N, K, t);
      auto x = randn(size_t(M) * K, 51);
      std::vector<float> yr(size_t(M) * N), yf(yr.size());
      ref::matmul(x.data(), M, w0, yr.data());
      for (const WeightMatrix& w : layouts(w0))
        for (int Mi : {1, 2, 3, 4, 5, 7, 8, 9, 16, M}) {  // decode and small-batch tiles, passes of 4 rows, strip tile
          std::fill(yf.begin(), yf.end(), std::nanf(""));  // no row may pass on an earlier call's output
          matmul(x.data(), Mi, w, yf.data(), nullptr);
          ASSERT_EQ(0, std::memcmp(yr.data(), yf.data(), size_t(Mi) * N * sizeof(float)))
              << layout_name(w) << " M=" << Mi << " on " << qmatmul_target_name();
        }
      QuantActs f, r;
      quantize_acts(x.data(), M, K, f);
      ref::quantize_acts(x.data(), M, K, r);
      ASSERT_EQ(f.q, r.q) << qmatmul_target_name();
    }
  });
  std::string names;
  for (const auto& n : tried) names += n + " ";
  std::printf("int8 matmul checked on: %s\n", names.c_str());
#if defined(__x86_64__)
  EXPECT_GE(tried.size(), 2u) << names;  // at least SSE4 and AVX2 on any x86-64 that runs AVX2
#else
  EXPECT_GE(tried.size(), 1u) << names;  // aarch64 builds Highway's NEON target only
#endif
}
