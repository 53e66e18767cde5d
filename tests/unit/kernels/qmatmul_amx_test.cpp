// The AMX-INT8 kernel for packed Q8_0/Q4_0 weights (kernels/cpu/qmatmul_amx.cpp) on the CPU's
// own tile unit, against the reference twin bit for bit (amx_checks.h). On a CPU without AMX
// (or a Linux that refuses the tile state) these tests are SKIPPED with the reason, which
// ctest reports as skipped ("Not Run"), never as passed: the kernel is compiled and linked,
// but such a machine has not checked it. qmatmul_amx_emulated_test.cpp checks the same source
// over a software model of the tile instructions everywhere.
#include <gtest/gtest.h>

#include <cstring>
#include <vector>

#include "amx_checks.h"
#include "kernels/cpu/quant_act.h"
#include "kernels/kernels.h"

using namespace dflash;

namespace {
constexpr const char* kNoAmx =
    "AMX NOT EXERCISED: this CPU has no AMX-TILE/AMX-INT8 (or Linux refused the tile state); "
    "the AMX kernel is compiled but was not run on hardware here";
}  // namespace

TEST(QMatmulAmx, BitEqualToReferenceForEveryRowCount1To64) {
  if (!amx_int8_available()) GTEST_SKIP() << kNoAmx;
  test::check_every_row_count(qmatmul_packed_range_amx);
}

TEST(QMatmulAmx, GroupRangesAndMoreThanOnePass) {
  if (!amx_int8_available()) GTEST_SKIP() << kNoAmx;
  test::check_group_ranges(qmatmul_packed_range_amx);
}

TEST(QMatmulAmx, MatmulDispatchGivesTheReferenceBits) {
  // matmul() takes the AMX kernel from kAmxMinRows rows on, the VNNI/AVX2 one below: both
  // give the reference bits, so a row's result does not depend on the batch.
  if (!amx_int8_available()) GTEST_SKIP() << kNoAmx;
  for (WType t : {WType::Q8_0, WType::Q4_0}) {
    const int64_t N = 72, K = 224;
    const WeightMatrix wp = pack_weight_matrix(test::random_quant(t, N, K, 5));
    const auto x = test::amx_randn(size_t(64) * size_t(K), 6);
    for (int M : {1, kAmxMinRows - 1, kAmxMinRows, 33, 64}) {
      std::vector<float> yr(size_t(M) * size_t(N)), yf(yr.size(), std::nanf(""));
      ref::matmul(x.data(), M, wp, yr.data());
      matmul(x.data(), M, wp, yf.data(), nullptr);
      ASSERT_EQ(0, std::memcmp(yr.data(), yf.data(), yr.size() * sizeof(float))) << wtype_name(t) << " M=" << M;
    }
  }
}
