// The SIMD element-wise kernels against their plain twins: the SiLU-gated product (including
// the tails and the extremes where exp overflows) and the f32 -> f16 conversion.
#include <gtest/gtest.h>

#include <cmath>
#include <cstdio>
#include <cstring>
#include <limits>
#include <random>
#include <string>
#include <vector>

#include "kernels/kernels.h"
#include "kernels/numeric.h"
#include "simd_targets.h"

using namespace dflash;

TEST(SiluMul, FastMatchesReferenceWithinFourUlp) {
  std::mt19937_64 rng(7);
  std::normal_distribution<float> nd(0.0f, 4.0f);
  for (int64_t n : {1, 3, 15, 16, 17, 64, 4864, 4871}) {
    const size_t sz = size_t(n);
    std::vector<float> g(sz), u(sz), fast(sz), ref(sz);
    for (auto& x : g) x = nd(rng);
    for (auto& x : u) x = nd(rng);
    g[0] = -200.0f;  // exp(-g) overflows in libm; Highway's Exp is capped
    if (n > 1) g[1] = 200.0f;
    if (n > 2) g[2] = 0.0f;
    silu_mul(g.data(), u.data(), n, fast.data());
    ref::silu_mul(g.data(), u.data(), n, ref.data());
    for (int64_t i = 0; i < n; ++i) {
      const float r = ref[size_t(i)], f = fast[size_t(i)];
      ASSERT_TRUE(std::isfinite(f)) << "n=" << n << " i=" << i;
      const float tol = 4 * std::numeric_limits<float>::epsilon() * std::fabs(r) + 1e-30f;
      EXPECT_NEAR(f, r, tol) << "n=" << n << " i=" << i << " g=" << g[size_t(i)];
    }
  }
}

TEST(SiluMul, OutputMayAliasGate) {
  std::vector<float> g = {-3.0f, -0.5f, 0.0f, 0.5f, 3.0f, 9.0f, -9.0f, 1.0f, 2.0f};
  std::vector<float> u(g.size(), 2.0f), expect(g.size());
  silu_mul(g.data(), u.data(), int64_t(g.size()), expect.data());
  silu_mul(g.data(), u.data(), int64_t(g.size()), g.data());
  for (size_t i = 0; i < g.size(); ++i) EXPECT_EQ(g[i], expect[i]);
}

// The SIMD f32 -> f16 conversion (the KV cache's) against the scalar definition, bit for bit,
// on every SIMD target this CPU runs: ties to even, the subnormal range, the overflow edge
// (65504 stays, 65520 rounds to infinity), infinities, zeros of both signs and NaNs with
// assorted payloads, at lengths with and without a tail.
TEST(F32ToF16Row, EverySimdTargetOfThisCpuMatchesTheScalarDefinitionBitForBit) {
  std::vector<float> x;
  std::mt19937_64 rng(11);
  std::uniform_int_distribution<uint32_t> any_bits;
  std::normal_distribution<float> nd(0.0f, 3.0f);
  for (int i = 0; i < 20000; ++i) x.push_back(nd(rng));
  for (int i = 0; i < 20000; ++i) {  // every exponent, NaNs and infinities included
    const uint32_t u = any_bits(rng);
    float f;
    std::memcpy(&f, &u, 4);
    x.push_back(f);
  }
  for (uint32_t h = 0; h < 0x7c00u; h += 7) {  // halfway between neighbouring f16 values: ties
    const float lo = f16_to_f32(uint16_t(h)), hi = f16_to_f32(uint16_t(h + 1));
    for (float s : {1.0f, -1.0f}) x.push_back(s * (lo + (hi - lo) * 0.5f));
  }
  for (float f : {0.0f, -0.0f, 65504.0f, 65519.99f, 65520.0f, -65520.0f, 1e-8f, 6e-8f, 3e-8f, 2.98e-8f, 6.1e-5f,
                  std::numeric_limits<float>::infinity(), -std::numeric_limits<float>::infinity(),
                  std::numeric_limits<float>::quiet_NaN(), -std::numeric_limits<float>::quiet_NaN(),
                  std::numeric_limits<float>::signaling_NaN(), std::numeric_limits<float>::denorm_min()})
    x.push_back(f);
  for (uint32_t u : {0x7f800001u, 0xff800001u, 0x7fa00000u, 0x7fffffffu, 0xffc00123u}) {
    float f;
    std::memcpy(&f, &u, 4);
    x.push_back(f);
  }
  std::vector<uint16_t> want(x.size());
  ref::f32_to_f16_row(x.data(), int64_t(x.size()), want.data());
  const auto tried = test::for_each_simd_target([&](const std::string& target) {
    for (int64_t n : {int64_t(x.size()), int64_t(x.size()) - 5, int64_t(1), int64_t(17)}) {
      std::vector<uint16_t> got(size_t(n), 0xdead);
      f32_to_f16_row(x.data(), n, got.data());
      for (int64_t i = 0; i < n; ++i)
        ASSERT_EQ(got[size_t(i)], want[size_t(i)]) << target << " n=" << n << " i=" << i << " x=" << x[size_t(i)];
    }
  });
  std::printf("f32 -> f16 checked on: %s\n", test::joined(tried).c_str());
  EXPECT_GE(tried.size(), size_t(2));
}
