// The packed Q8_0/Q4_0 matmul (weight_matrix.h layout, quant_act.h definition) on ARM cores
// with the dot-product extension (ARMv8.2 dotprod: Apple M1 and later, Neoverse, Cortex-A76
// and later). Highway 1.0.3, the version Debian 12 ships, has no int8 dot-product op, so this
// is written with arm_neon.h and chosen at run time from the CPU's feature bits; without the
// extension the Highway build's portable code runs.
//
// A 16-byte load of a packed chunk holds 4 weights of each of 4 rows, which is exactly what
// SDOT's indexed form multiplies with one 4-byte group of the activations: one instruction
// per 4 rows x 4 weights, summed exactly in int32 lanes. Q4_0's nibbles 0..15 are already
// valid signed bytes (the -8 zero point goes in as -8 * block sum, as on x86); Q8_0's biased
// bytes are made signed again by flipping the top bit. Then one convert and one fused
// multiply-add per output and block, the same fp32 chain as the reference twin, so results
// are bit-equal to it. Tested under qemu-aarch64 (scripts/test-arm64.sh); its speed has not
// been measured on ARM hardware.
#include "kernels/cpu/quant_act.h"

#if defined(__aarch64__)
#include <arm_neon.h>

#include <algorithm>
#if defined(__linux__)
#include <asm/hwcap.h>
#include <sys/auxv.h>
#elif defined(__APPLE__)
#include <sys/sysctl.h>
#endif

namespace dflash {

bool neon_dotprod_available() {
#if defined(__linux__)
  static const bool has = (getauxval(AT_HWCAP) & HWCAP_ASIMDDP) != 0;
#elif defined(__APPLE__)
  static const bool has = [] {
    int v = 0;
    size_t n = sizeof(v);
    return sysctlbyname("hw.optional.arm.FEAT_DotProd", &v, &n, nullptr, 0) == 0 && v != 0;
  }();
#else
  static const bool has = false;
#endif
  return has;
}

namespace {

// GCC's arm_neon.h declares SDOT for armv8.2-a+dotprod, and a caller's target must include it.
#if defined(__clang__)
#define DFLASH_DOTPROD __attribute__((target("dotprod")))
#else
#define DFLASH_DOTPROD __attribute__((target("arch=armv8.2-a+dotprod")))
#endif

// Chunk C of a block for one activation row: 4 loads of 4 rows each, against the 4-byte
// activation groups C of xlo (and of xhi for Q4_0's high nibbles).
template <WType T, int C>
DFLASH_DOTPROD inline __attribute__((always_inline)) void Chunk(const uint8_t* q, int8x16_t xlo, int8x16_t xhi, int32x4_t* ia) {
  constexpr int lane = C % 4;
  #pragma GCC unroll 8
  for (int j = 0; j < 4; ++j) {
    const uint8x16_t raw = vld1q_u8(q + 64 * C + 16 * j);
    if constexpr (T == WType::Q4_0) {
      ia[j] = vdotq_laneq_s32(ia[j], vreinterpretq_s8_u8(vandq_u8(raw, vdupq_n_u8(15))), xlo, lane);
      ia[j] = vdotq_laneq_s32(ia[j], vreinterpretq_s8_u8(vshrq_n_u8(raw, 4)), xhi, lane);
    } else {
      const int8x16_t w = vreinterpretq_s8_u8(veorq_u8(raw, vdupq_n_u8(0x80)));
      ia[j] = vdotq_laneq_s32(ia[j], w, C < 4 ? xlo : xhi, lane);
    }
  }
}

// Rows [m0, m0 + MR) of the activations times one 16-row group g, every block.
template <WType T, int MR>
DFLASH_DOTPROD void Tile(const QuantActs& a, int m0, const WeightMatrix& w, const PackedGeometry& pg, float* y,
                         int64_t g) {
  float32x4_t acc[MR][4];
  #pragma GCC unroll 8
  for (int m = 0; m < MR; ++m)
    #pragma GCC unroll 8
    for (int j = 0; j < 4; ++j) acc[m][j] = vdupq_n_f32(0.0f);
  for (int64_t b = 0; b < pg.blocks; ++b) {
    const uint8_t* q = w.packed_quants(pg, g, b);
    const uint16_t* sc = w.packed_scales(pg, g, b);
    float32x4_t ws[4];
    #pragma GCC unroll 8
    for (int j = 0; j < 4; ++j) ws[j] = vcvt_f32_f16(vreinterpret_f16_u16(vld1_u16(sc + 4 * j)));
    #pragma GCC unroll 8
    for (int m = 0; m < MR; ++m) {
      const int8_t* x = a.qrow(m0 + m) + 32 * b;
      const int8x16_t xlo = vld1q_s8(x), xhi = vld1q_s8(x + 16);
      // Q8_0 is signed again here, so only Q4_0 has a zero point to take out.
      const int32x4_t off = vdupq_n_s32(T == WType::Q4_0 ? -8 * a.srow(m0 + m)[b] : 0);
      int32x4_t ia[4] = {off, off, off, off};
      Chunk<T, 0>(q, xlo, xhi, ia);
      Chunk<T, 1>(q, xlo, xhi, ia);
      Chunk<T, 2>(q, xlo, xhi, ia);
      Chunk<T, 3>(q, xlo, xhi, ia);
      if constexpr (T == WType::Q8_0) {
        Chunk<T, 4>(q, xlo, xhi, ia);
        Chunk<T, 5>(q, xlo, xhi, ia);
        Chunk<T, 6>(q, xlo, xhi, ia);
        Chunk<T, 7>(q, xlo, xhi, ia);
      }
      const float32x4_t d = vdupq_n_f32(a.drow(m0 + m)[b]);
      #pragma GCC unroll 8
      for (int j = 0; j < 4; ++j) acc[m][j] = vfmaq_f32(acc[m][j], vcvtq_f32_s32(ia[j]), vmulq_f32(ws[j], d));
    }
  }
  const int64_t N = w.rows, n0 = g * kPackRows;
  #pragma GCC unroll 8
  for (int m = 0; m < MR; ++m) {
    float* out = y + int64_t(m0 + m) * N;
    #pragma GCC unroll 8
    for (int j = 0; j < 4; ++j) {
      const int64_t n = n0 + 4 * j;
      if (n + 4 <= N) {
        vst1q_f32(out + n, acc[m][j]);
      } else {
        float t[4];
        vst1q_f32(t, acc[m][j]);
        for (int64_t i = n; i < N; ++i) out[i] = t[i - n];
      }
    }
  }
}

template <WType T>
void Range(const QuantActs& a, int M, const WeightMatrix& w, float* y, int64_t g0, int64_t g1) {
  const PackedGeometry pg = packed_geometry(w.type, w.rows, w.cols);
  for (int64_t g = g0; g < g1; ++g) {
    if (g * kPackRows >= w.rows) break;  // the zero rows that pad the last set of 4 groups
    int m = 0;
    for (; m + 2 <= M; m += 2) Tile<T, 2>(a, m, w, pg, y, g);
    if (m < M) Tile<T, 1>(a, m, w, pg, y, g);
  }
}

}  // namespace

void qmatmul_packed_range_dotprod(const QuantActs& a, int M, const WeightMatrix& w, float* y, int64_t g0,
                                  int64_t g1) {
  if (w.type == WType::Q4_0) Range<WType::Q4_0>(a, M, w, y, g0, g1);
  else if (w.type == WType::Q8_0) Range<WType::Q8_0>(a, M, w, y, g0, g1);
}

}  // namespace dflash

#else

namespace dflash {
bool neon_dotprod_available() { return false; }
void qmatmul_packed_range_dotprod(const QuantActs&, int, const WeightMatrix&, float*, int64_t, int64_t) {}
}  // namespace dflash

#endif
