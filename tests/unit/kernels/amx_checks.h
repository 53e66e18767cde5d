#pragma once
// The checks of the AMX-INT8 packed kernel against the reference twin, for any function with
// qmatmul_packed_range's signature: the kernel itself where the CPU has AMX
// (qmatmul_amx_test.cpp) and the same source over a software model of the tile instructions
// (qmatmul_amx_emulated_test.cpp). Bit for bit, every row count 1..64 and a few beyond one
// 64-row pass, N not a multiple of 16, K a multiple of 32 but not of 64, random stored
// integers over their whole range (Q8_0's -128 included).
#include <gtest/gtest.h>

#include <cmath>
#include <cstring>
#include <random>
#include <vector>

#include "kernels/cpu/quant_act.h"
#include "kernels/kernels.h"
#include "kernels/numeric.h"

namespace dflash::test {

using PackedKernel = void (*)(const QuantActs&, int, const WeightMatrix&, float*, int64_t, int64_t);

// A row-layout Q8_0/Q4_0 matrix with random stored integers over their whole range and random
// fp16 scales of either sign.
inline WeightMatrix random_quant(WType t, int64_t N, int64_t K, uint64_t seed) {
  std::mt19937_64 rng(seed);
  uint8_t* bytes = nullptr;
  WeightMatrix w = alloc_weight_matrix(t, N, K, &bytes);
  std::uniform_real_distribution<float> scale(1e-4f, 0.05f);
  for (int64_t r = 0; r < N; ++r)
    for (int64_t b = 0; b < K / 32; ++b) {
      const uint16_t d = f32_to_f16((rng() & 1) ? scale(rng) : -scale(rng));
      if (t == WType::Q8_0) {
        BlockQ8_0& blk = reinterpret_cast<BlockQ8_0*>(bytes + size_t(r) * row_bytes(t, K))[b];
        blk.d = d;
        for (auto& q : blk.qs) q = int8_t(uint8_t(rng()));
      } else {
        BlockQ4_0& blk = reinterpret_cast<BlockQ4_0*>(bytes + size_t(r) * row_bytes(t, K))[b];
        blk.d = d;
        for (auto& q : blk.qs) q = uint8_t(rng());
      }
    }
  return w;
}

inline std::vector<float> amx_randn(size_t n, uint64_t seed) {
  std::mt19937_64 rng(seed);
  std::normal_distribution<float> nd(0.0f, 1.0f);
  std::vector<float> v(n);
  for (auto& x : v) x = nd(rng);
  // Spikes, so that some blocks quantize with their other values near 0 and others hit +-127.
  for (size_t i = 0; i < n; i += 37) v[i] *= 40.0f;
  return v;
}

// Every row count 1..64 over all groups, for Q8_0 and Q4_0 and several N x K.
inline void check_every_row_count(PackedKernel kernel) {
  struct Shape {
    int64_t N, K;
  };
  // N: below one group, not a multiple of 16, several sets of 4 groups; K: 1, 3, 5, 9, 16, 2 blocks.
  const Shape shapes[] = {{5, 32}, {41, 96}, {16, 160}, {100, 288}, {130, 512}, {64, 64}};
  constexpr int kMaxM = 64;
  for (WType t : {WType::Q8_0, WType::Q4_0})
    for (const Shape& s : shapes) {
      const WeightMatrix w0 = random_quant(t, s.N, s.K, 1000 + uint64_t(s.N * s.K));
      const WeightMatrix wp = pack_weight_matrix(w0);
      ASSERT_TRUE(wp.packed);
      const PackedGeometry pg = packed_geometry(t, s.N, s.K);
      const auto x = amx_randn(size_t(kMaxM) * size_t(s.K), 7 + uint64_t(s.K));
      QuantActs a;
      ref::quantize_acts(x.data(), kMaxM, s.K, a);
      std::vector<float> yr(size_t(kMaxM) * size_t(s.N)), ya(yr.size());
      ref::qmatmul(a, kMaxM, w0, yr.data());  // rows are independent: row m of any M is row m here
      for (int M = 1; M <= kMaxM; ++M) {
        std::fill(ya.begin(), ya.end(), std::nanf(""));
        kernel(a, M, wp, ya.data(), 0, pg.groups);
        ASSERT_EQ(0, std::memcmp(yr.data(), ya.data(), size_t(M) * size_t(s.N) * sizeof(float)))
            << wtype_name(t) << " N=" << s.N << " K=" << s.K << " M=" << M;
        for (size_t i = size_t(M) * size_t(s.N); i < ya.size(); ++i)
          ASSERT_TRUE(std::isnan(ya[i])) << "wrote past row M=" << M;
      }
    }
}

// More than one 64-row pass, and the pieces a thread split hands out (sets of 4 groups) plus
// odd single groups.
inline void check_group_ranges(PackedKernel kernel) {
  for (WType t : {WType::Q8_0, WType::Q4_0}) {
    const int64_t N = 200, K = 352;  // 13 groups (16 with padding), 11 blocks
    const WeightMatrix w0 = random_quant(t, N, K, 77);
    const WeightMatrix wp = pack_weight_matrix(w0);
    const PackedGeometry pg = packed_geometry(t, N, K);
    for (int M : {65, 80, 129, 150}) {
      const auto x = amx_randn(size_t(M) * size_t(K), 99 + uint64_t(M));
      QuantActs a;
      ref::quantize_acts(x.data(), M, K, a);
      std::vector<float> yr(size_t(M) * size_t(N)), ya(yr.size(), std::nanf(""));
      ref::qmatmul(a, M, w0, yr.data());
      kernel(a, M, wp, ya.data(), 0, 4);
      kernel(a, M, wp, ya.data(), 4, 12);
      kernel(a, M, wp, ya.data(), 12, 13);
      kernel(a, M, wp, ya.data(), 13, pg.groups);
      ASSERT_EQ(0, std::memcmp(yr.data(), ya.data(), yr.size() * sizeof(float))) << wtype_name(t) << " M=" << M;
    }
  }
}

}  // namespace dflash::test
