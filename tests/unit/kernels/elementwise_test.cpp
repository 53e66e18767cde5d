// The SIMD SiLU-gated product against its libm twin, including the tails and the extremes
// where exp overflows.
#include <gtest/gtest.h>

#include <cmath>
#include <limits>
#include <random>
#include <vector>

#include "kernels/kernels.h"

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
