// The AMX-INT8 kernel's source (kernels/cpu/qmatmul_amx.cpp) compiled a second time over a
// software model of the six tile instructions it uses, so that its layout logic (the B tiles
// of the packed layout, Q4_0's nibble split, the 16-row A tiles with their overlapping or
// zero-padded tails, the per-block zeroed C tiles, the zero point, the fp32 chain, the row
// and group ranges) is checked bit for bit against the reference twin on any CPU with
// AVX-512 (the kernel's fp32 part). The model follows the Intel SDM pseudo-code (palette 1;
// TDPBSUD: dst.dword[m][n] += sum over k, i of sign_extend(a.byte[m][4k+i]) *
// zero_extend(b.byte[k][4n+i]), wrapping int32) and checks the shape rules whose violation
// faults (#UD) on hardware. What it cannot check: the real instruction encodings and
// operand order, the OS permission, and speed; qmatmul_amx_test.cpp does, where AMX exists.
#include <gtest/gtest.h>

#include <cstdint>
#include <cstring>

#include "kernels/cpu/quant_act.h"

namespace amx_model {

struct State {
  bool configured = false, fault = false;
  uint8_t rows[8] = {};
  uint16_t colsb[8] = {};
  uint8_t t[8][16][64] = {};
  int64_t dp_ops = 0;
};
thread_local State st;

inline void require(bool ok) {
  if (!ok) st.fault = true;
}
inline void loadconfig(const void* cfg) {
  const uint8_t* p = static_cast<const uint8_t*>(cfg);
  require(p[0] == 1);  // palette 1
  for (int i = 0; i < 8; ++i) {
    st.colsb[i] = uint16_t(p[16 + 2 * i] | (p[17 + 2 * i] << 8));
    st.rows[i] = p[48 + i];
    require(st.rows[i] <= 16 && st.colsb[i] <= 64);
  }
  std::memset(st.t, 0, sizeof(st.t));
  st.configured = true;
}
inline void release() {
  st.configured = false;
  std::memset(st.t, 0, sizeof(st.t));
}
inline void loadd(int t, const void* base, long stride) {
  require(st.configured);
  const uint8_t* p = static_cast<const uint8_t*>(base);
  std::memset(st.t[t], 0, sizeof(st.t[t]));
  for (int r = 0; r < st.rows[t]; ++r) std::memcpy(st.t[t][r], p + r * stride, st.colsb[t]);
}
inline void stored(int t, void* base, long stride) {
  require(st.configured);
  for (int r = 0; r < st.rows[t]; ++r) std::memcpy(static_cast<uint8_t*>(base) + r * stride, st.t[t][r], st.colsb[t]);
}
inline void zero(int t) {
  require(st.configured);
  std::memset(st.t[t], 0, sizeof(st.t[t]));
}
inline void dpbsud(int c, int a, int b) {
  require(st.configured);
  require(st.rows[c] == st.rows[a] && st.colsb[a] / 4 == st.rows[b] && st.colsb[c] == st.colsb[b]);
  require(c != a && c != b && a != b);
  ++st.dp_ops;
  for (int m = 0; m < st.rows[c]; ++m)
    for (int n = 0; n < st.colsb[c] / 4; ++n) {
      int32_t acc;
      std::memcpy(&acc, &st.t[c][m][4 * n], 4);
      uint32_t u = uint32_t(acc);
      for (int k = 0; k < st.colsb[a] / 4; ++k)
        for (int i = 0; i < 4; ++i)
          u += uint32_t(int32_t(int8_t(st.t[a][m][4 * k + i])) * int32_t(st.t[b][k][4 * n + i]));
      acc = int32_t(u);
      std::memcpy(&st.t[c][m][4 * n], &acc, 4);
    }
}

}  // namespace amx_model

// The kernel source with the model in place of the instructions, its public functions renamed.
#define DFLASH_AMX_OPS 1
#define DFLASH_TILE_LOADCONFIG(cfg) amx_model::loadconfig(cfg)
#define DFLASH_TILE_RELEASE() amx_model::release()
#define DFLASH_TILE_LOADD(t, base, stride) amx_model::loadd(t, base, stride)
#define DFLASH_TILE_STORED(t, base, stride) amx_model::stored(t, base, stride)
#define DFLASH_TILE_ZERO(t) amx_model::zero(t)
#define DFLASH_TILE_DPBSUD(c, a, b) amx_model::dpbsud(c, a, b)
#define amx_int8_available amx_int8_available_unused
#define qmatmul_packed_range_amx qmatmul_packed_range_amx_modelled
#include "kernels/cpu/qmatmul_amx.cpp"
#undef amx_int8_available
#undef qmatmul_packed_range_amx

#include "amx_checks.h"

#if DFLASH_AMX
namespace {
bool cpu_runs_fp32_part() {
  return __builtin_cpu_supports("avx512f") && __builtin_cpu_supports("avx512bw") &&
         __builtin_cpu_supports("avx512vl") && __builtin_cpu_supports("fma") && __builtin_cpu_supports("f16c");
}
}  // namespace

TEST(QMatmulAmxModel, BitEqualToReferenceForEveryRowCount1To64) {
  if (!cpu_runs_fp32_part()) GTEST_SKIP() << "AMX kernel source NOT CHECKED: this CPU lacks AVX-512 for its fp32 part";
  amx_model::st = {};
  dflash::test::check_every_row_count(dflash::qmatmul_packed_range_amx_modelled);
  EXPECT_FALSE(amx_model::st.fault) << "a tile op the hardware would fault on";
  EXPECT_GT(amx_model::st.dp_ops, 0);
}

TEST(QMatmulAmxModel, GroupRangesAndMoreThanOnePass) {
  if (!cpu_runs_fp32_part()) GTEST_SKIP() << "AMX kernel source NOT CHECKED: this CPU lacks AVX-512 for its fp32 part";
  amx_model::st = {};
  dflash::test::check_group_ranges(dflash::qmatmul_packed_range_amx_modelled);
  EXPECT_FALSE(amx_model::st.fault) << "a tile op the hardware would fault on";
}

TEST(QMatmulAmxModel, OneTileProductPerBlockAndGroup) {
  // Block sums never merge: each C tile takes exactly one 32-weight block (one dot product per
  // A tile, group and block).
  if (!cpu_runs_fp32_part()) GTEST_SKIP() << "AMX kernel source NOT CHECKED: this CPU lacks AVX-512 for its fp32 part";
  using namespace dflash;
  const int64_t N = 64, K = 96;  // 4 groups, 3 blocks
  const WeightMatrix wp = pack_weight_matrix(test::random_quant(WType::Q8_0, N, K, 3));
  const auto x = test::amx_randn(size_t(40) * size_t(K), 4);
  QuantActs a;
  ref::quantize_acts(x.data(), 40, K, a);
  std::vector<float> y(size_t(40) * size_t(N));
  amx_model::st = {};
  qmatmul_packed_range_amx_modelled(a, 40, wp, y.data(), 0, 4);
  EXPECT_EQ(amx_model::st.dp_ops, 3 /* A tiles */ * 4 /* groups */ * 3 /* blocks */);
  EXPECT_FALSE(amx_model::st.fault);
}
#endif
