// The row-wise ops of kernels/vector_ops.h against their definitions computed another way
// (double precision, or by hand), their batch invariance, and the CPU backend object that
// hands them and the fast kernels to the models.
#include <gtest/gtest.h>

#include <cmath>
#include <cstring>
#include <limits>
#include <random>
#include <vector>

#include "kernels/backend.h"
#include "kernels/vector_ops.h"

using namespace dflash;

namespace {

std::vector<float> randn(size_t n, uint64_t seed) {
  std::mt19937_64 rng(seed);
  std::normal_distribution<float> nd(0.0f, 1.0f);
  std::vector<float> v(n);
  for (auto& x : v) x = nd(rng);
  return v;
}

}  // namespace

TEST(VectorOps, ElementwiseOpsFollowTheirDefinitions) {
  auto x = randn(100, 1), y = randn(100, 2), b = randn(10, 3);
  auto s = x;
  add_rows(s.data(), y.data(), s.size());
  for (size_t i = 0; i < s.size(); ++i) ASSERT_EQ(x[i] + y[i], s[i]);
  s = x;
  add_bias_rows(s.data(), 10, b.data(), 10);
  for (size_t i = 0; i < s.size(); ++i) ASSERT_EQ(x[i] + b[i % 10], s[i]);
  s = x;
  scale_rows(s.data(), s.size(), 0.25f);
  for (size_t i = 0; i < s.size(); ++i) ASSERT_EQ(x[i] * 0.25f, s[i]);
  s = x;
  softcap_rows(s.data(), s.size(), 3.0f);
  for (size_t i = 0; i < s.size(); ++i) ASSERT_NEAR(3.0 * std::tanh(double(x[i]) / 3.0), s[i], 1e-6);
  std::vector<float> big = {1.0f, 65504.0f, 70000.0f, -1e6f};
  round_rows_to_f16(big.data(), big.size());
  EXPECT_EQ(1.0f, big[0]);
  EXPECT_EQ(65504.0f, big[1]);
  EXPECT_TRUE(std::isinf(big[2]));  // what an fp16 engine stores
  EXPECT_TRUE(std::isinf(big[3]) && big[3] < 0);
  EXPECT_FALSE(all_finite_rows(big.data(), big.size()));
  EXPECT_TRUE(all_finite_rows(x.data(), x.size()));
}

TEST(VectorOps, RopeTablesDependOnEachRowsPositionOnly) {
  const std::vector<double> inv = {1.0, 0.1, 0.01, 0.001};
  const std::vector<int> pos = {0, 7, 1000, 7};
  std::vector<float> c(16), s(16);
  rope_table_rows(inv.data(), 4, pos.data(), 4, 0.5f, c.data(), s.data());
  for (int i = 0; i < 4; ++i)
    for (int j = 0; j < 4; ++j) {
      const double a = double(float(pos[size_t(i)]) * float(inv[size_t(j)]));
      ASSERT_NEAR(0.5 * std::cos(a), c[size_t(i * 4 + j)], 1e-6);
      ASSERT_NEAR(0.5 * std::sin(a), s[size_t(i * 4 + j)], 1e-6);
    }
  // Rows 1 and 3 share a position: the same bits.
  ASSERT_EQ(0, std::memcmp(&c[4], &c[12], 16));
  std::vector<float> c1(4), s1(4);
  rope_table_rows(inv.data(), 4, &pos[2], 1, 0.5f, c1.data(), s1.data());
  ASSERT_EQ(0, std::memcmp(&c[8], c1.data(), 16));
}

TEST(VectorOps, CausalBlockConvMatchesItsDefinitionInDoublePrecision) {
  const int rows = 6, dim = 32, taps = 3, group = 8, G = dim / group;
  const auto in = randn(size_t(rows) * dim, 4), base = randn(size_t(taps) * dim, 5);
  const size_t stride = size_t(2) * taps * G;  // two sides, as DFlash2 lays them out
  const auto dyn = randn(size_t(rows) * stride, 6);
  std::vector<float> out(in.size());
  causal_block_conv({in.data(), out.data(), rows, dim, taps, group, base.data(), dyn.data(), stride});
  for (int t = 0; t < rows; ++t)
    for (int c = 0; c < dim; ++c) {
      double want = 0;
      for (int k = 0; k < taps && k <= t; ++k)
        want += (double(base[size_t(k * dim + c)]) + dyn[size_t(t) * stride + size_t(k * G + c / group)]) *
                in[size_t((t - k) * dim + c)];
      ASSERT_NEAR(want, out[size_t(t * dim + c)], 1e-4) << t << " " << c;
    }
  // The first row sees only itself; a later block's rows do not change an earlier row.
  auto in2 = in;
  for (size_t i = size_t(dim); i < in2.size(); ++i) in2[i] += 1.0f;
  std::vector<float> out2(in.size());
  causal_block_conv({in2.data(), out2.data(), rows, dim, taps, group, base.data(), dyn.data(), stride});
  ASSERT_EQ(0, std::memcmp(out.data(), out2.data(), sizeof(float) * dim));
}

TEST(VectorOps, EdgeScoresAreTheScaledDotProducts) {
  const int np = 3, nc = 4, R = 16;
  const auto pred = randn(size_t(np) * R, 7), h = randn(R, 8), succ = randn(size_t(nc) * R, 9);
  std::vector<float> out(size_t(np) * nc);
  edge_scores({pred.data(), np, h.data(), succ.data(), nc, R, out.data()});
  for (int i = 0; i < np; ++i)
    for (int j = 0; j < nc; ++j) {
      double want = 0;
      for (int r = 0; r < R; ++r) want += double(pred[size_t(i * R + r)]) * h[size_t(r)] * succ[size_t(j * R + r)];
      ASSERT_NEAR(want, out[size_t(i * nc + j)], 1e-4);
    }
  // One predecessor at a time gives the same bits as all of them together.
  std::vector<float> one(static_cast<size_t>(nc));
  edge_scores({pred.data() + R, 1, h.data(), succ.data(), nc, R, one.data()});
  ASSERT_EQ(0, std::memcmp(one.data(), out.data() + nc, sizeof(float) * nc));
}

TEST(VectorOps, TopKOrdersByValueThenById) {
  const std::vector<float> x = {0.5f, 2.0f, -1.0f, 2.0f, 0.5f, 3.0f,   // row 0
                                 1.0f, 1.0f, 1.0f, 9.0f, -2.0f, 1.0f};  // row 1
  std::vector<int32_t> k(8);
  top_k_ids(x.data(), 2, 6, 4, k.data());
  EXPECT_EQ((std::vector<int32_t>{5, 1, 3, 0, 3, 0, 1, 2}), k);
}

TEST(CpuBackend, OpsAreTheKernelsAndPreparationIsLossless) {
  auto be = make_cpu_backend(2);
  EXPECT_EQ(2, be->threads());
  EXPECT_NE(std::string::npos, std::string(be->name()).find("cpu"));
  const int rows = 64, cols = 64, M = 3;
  const auto w32 = randn(size_t(rows) * cols, 10), x = randn(size_t(M) * cols, 11);
  WeightMatrix w = make_weight_matrix(w32.data(), rows, cols, WType::Q8_0);
  std::vector<float> before(size_t(M) * rows), after(before.size()), direct(before.size());
  be->matmul(x.data(), M, w, before.data());
  be->prepare_weight(w);  // the interleaved layout the int8 kernels stream
  EXPECT_TRUE(w.packed);
  be->matmul(x.data(), M, w, after.data());
  ThreadPool pool(1);
  matmul(x.data(), M, w, direct.data(), &pool);
  ASSERT_EQ(0, std::memcmp(before.data(), after.data(), sizeof(float) * before.size()));
  ASSERT_EQ(0, std::memcmp(direct.data(), after.data(), sizeof(float) * before.size()));
  auto mem = be->allocate(1 << 20);
  ASSERT_NE(nullptr, mem.get());
  EXPECT_EQ(0, mem.get()[12345]);  // zero-filled
  ActivationBuffer buf;
  float* a = buf.floats(*be, 100);
  EXPECT_EQ(a, buf.floats(*be, 50));  // no reallocation for a smaller call
  EXPECT_NE(nullptr, buf.floats(*be, 1 << 20));
}
