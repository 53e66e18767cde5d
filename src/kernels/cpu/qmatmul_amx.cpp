// The packed Q8_0/Q4_0 matmul (weight_matrix.h layout, quant_act.h definition) with Intel AMX
// tiles (AMX-TILE + AMX-INT8: Sapphire Rapids and later Xeons), for batches of many rows
// (verify blocks, prefill). Chosen at run time by qmatmul_packed_range when M >= kAmxMinRows
// and amx_int8_available(): the CPU reports AMX-TILE, AMX-INT8 and AVX-512 F/BW, the OS
// enables their register state (XCR0), and Linux grants this process the tile data
// (arch_prctl(ARCH_REQ_XCOMP_PERM, XFEATURE_XTILEDATA)). Everything else takes the Highway
// kernels. The file is compiled without extra flags; only the kernel functions carry the
// target attribute, so no AVX-512 or AMX code can leak into shared inline functions and the
// binary still runs on CPUs without them.
//
// Why it is bit-equal to the reference twin (ref::qmatmul) and to the VNNI kernel:
//   - The integer part. A packed block of a 16-row group is 8 chunks of 64 bytes, chunk c
//     holding weights k = 4c..4c+3 of each row r at bytes 4r..4r+3 (Q4_0: decoded here to
//     that form, low nibbles as chunks 0-3, high nibbles as chunks 4-7). That is exactly the
//     B operand of a tile dot product: 8 rows (K = 32 bytes / 4) of 16 dwords. The A operand
//     is 16 activation rows x the block's 32 int8 values. TDPBSUD (signed A x unsigned B:
//     the activations are signed, the packed weights unsigned) adds, for each output, the 32
//     products of the block in int32, which cannot overflow (|sum| <= 32 * 255 * 127), so the
//     result is the exact integer sum of u * x, in any order. The C tile is zeroed before
//     every block: one tile op covers exactly one 32-weight block, never two, so no block
//     sums merge. The weights' zero point is then added exactly as the VNNI kernel does
//     (Q4_0: -8 * xs, Q8_0: -128 * xs, xs the block's activation sum), giving the signed
//     block sum isum of the definition.
//   - The fp32 part, per output and block in increasing order, from +0:
//       acc = fma(float(isum), dw * dx, acc)
//     with dw the fp16 scale widened (exact), dw * dx one rounded fp32 multiply and one fused
//     multiply-add: the same instructions in the same order as the VNNI kernel
//     (_mm512_fmadd_ps(_mm512_cvtepi32_ps(ia), _mm512_mul_ps(ws, d), acc)) and as
//     block_fma() in the reference. float(isum) is exact (|isum| < 2^24).
//   - No fp32 value depends on M or on which other rows share a tile (padding rows are
//     computed and discarded), so batch invariance holds across the M threshold.
//
// NOT TESTED ON HARDWARE: the machine this was written on has no AMX and no emulator was
// available. tests/unit/kernels/qmatmul_amx_test.cpp compares it with the reference bit for
// bit for M = 1..64 where AMX exists, and is reported as skipped (never passed) elsewhere.
#include <cstddef>
#include <cstdlib>
#include <cstring>
#include <vector>

#include "kernels/cpu/quant_act.h"

#if defined(__x86_64__) && defined(__linux__) && defined(__GNUC__)
#define DFLASH_AMX 1
#include <cpuid.h>
#include <immintrin.h>
#include <sys/syscall.h>
#include <unistd.h>
#else
#define DFLASH_AMX 0
#endif

namespace dflash {

#if DFLASH_AMX

bool amx_int8_available() {
  static const bool has = [] {
    unsigned a, b, c, d;
    if (!__get_cpuid(1, &a, &b, &c, &d) || !(c & (1u << 27))) return false;  // OSXSAVE
    if (!__get_cpuid_count(7, 0, &a, &b, &c, &d)) return false;
    const bool tile = d & (1u << 24), int8 = d & (1u << 25);
    const bool avx512 = (b & (1u << 16)) && (b & (1u << 30));  // F, BW
    if (!tile || !int8 || !avx512) return false;
    uint32_t lo, hi;
    __asm__ volatile("xgetbv" : "=a"(lo), "=d"(hi) : "c"(0));
    const uint64_t xcr0 = (uint64_t(hi) << 32) | lo;
    const uint64_t need = 0xE6 | (3ull << 17);  // SSE, AVX, opmask, ZMM (1, 2, 5-7); XTILECFG, XTILEDATA
    if ((xcr0 & need) != need) return false;
    // Linux >= 5.16 hands out the 8 KiB tile state only on request; without it the first
    // tile instruction faults. The permission is the process's, for all its threads.
    constexpr long kArchReqXcompPerm = 0x1023, kXfeatureXtiledata = 18;
    return syscall(SYS_arch_prctl, kArchReqXcompPerm, kXfeatureXtiledata) == 0;
  }();
  return has;
}

namespace {

// GCC 12 reports its own _mm512_undefined_ps() (a self-initialized placeholder that the
// convert intrinsics pass for their unused merge source) as maybe uninitialized when they are
// inlined into a function with a target attribute at -O3: a false report.
#pragma GCC diagnostic push
#pragma GCC diagnostic ignored "-Wmaybe-uninitialized"

#define DFLASH_AMX_TARGET __attribute__((target("amx-tile,amx-int8,avx512f,avx512bw,avx512vl,fma,f16c")))
// The tile instructions. tests/unit/kernels/qmatmul_amx_emulated_test.cpp compiles this file
// again with its own software model of them (DFLASH_AMX_OPS defined), to check the layout
// logic on CPUs without AMX.
#ifndef DFLASH_AMX_OPS
#define DFLASH_TILE_LOADCONFIG(cfg) _tile_loadconfig(cfg)
#define DFLASH_TILE_RELEASE() _tile_release()
#define DFLASH_TILE_LOADD(t, base, stride) _tile_loadd(t, base, stride)
#define DFLASH_TILE_STORED(t, base, stride) _tile_stored(t, base, stride)
#define DFLASH_TILE_ZERO(t) _tile_zero(t)
#define DFLASH_TILE_DPBSUD(c, a, b) _tile_dpbsud(c, a, b)  // c += signed(a) . unsigned(b)
#endif
// The tile loads are asm statements without a memory operand: stores to the buffers they
// read (Q4_0's decoded weights) must be forced out before them.
#define DFLASH_AMX_BARRIER() __asm__ volatile("" ::: "memory")

// Palette 1: A tiles tmm0-1 (16 rows x 32 bytes: one block of 16 activation rows), B tiles
// tmm2-3 (8 rows x 64 bytes: one block of a 16-row weight group), C tiles tmm4-7 (16 x 16
// int32: C(i, j) = tmm(4 + 2i + j) for A tile i and B tile j).
struct alignas(64) TileConfig {
  uint8_t palette = 1, start_row = 0;
  uint8_t reserved[14] = {};
  uint16_t colsb[16] = {};  // bytes 16-47; tiles 8-15 must stay 0 in palette 1
  uint8_t rows[16] = {};    // bytes 48-63
};
static_assert(sizeof(TileConfig) == 64 && offsetof(TileConfig, colsb) == 16 && offsetof(TileConfig, rows) == 48);

constexpr TileConfig make_config() {
  TileConfig c;
  for (int t = 0; t < 2; ++t) c.rows[t] = 16, c.colsb[t] = 32;
  for (int t = 2; t < 4; ++t) c.rows[t] = 8, c.colsb[t] = 64;
  for (int t = 4; t < 8; ++t) c.rows[t] = 16, c.colsb[t] = 64;
  return c;
}
constexpr TileConfig kTileConfig = make_config();  // constant-initialized: no stores for the asm to miss

constexpr int kChunkRows = kPackedOnePassRows;  // activation rows per pass over the weights (4 A tiles)

struct AmxArgs {
  const QuantActs& a;
  int M;
  const WeightMatrix& w;
  PackedGeometry pg;
  float* y;
  int64_t N;
  const int8_t* pad;  // M < 16: the M rows zero-padded to 16 (16 x Kp bytes); else null
};

// Activation tile starting at row `base` (16 rows, stride Kp), block b.
inline const int8_t* a_tile(const AmxArgs& p, int base, int64_t b) {
  return (p.pad ? p.pad + size_t(base) * size_t(p.a.Kp) : p.a.qrow(base)) + 32 * b;
}

// The 8 x 64-byte B operand of block b of group g: Q8_0's packed bytes as they are; Q4_0's
// 4 chunks split into low nibbles (k = 4c + j, rows 0-3) and high nibbles (k = 16 + 4c + j,
// rows 4-7) in buf.
template <WType T>
DFLASH_AMX_TARGET inline __attribute__((always_inline)) const uint8_t* b_tile(const AmxArgs& p, int64_t g, int64_t b,
                                                                             uint8_t* buf) {
  const uint8_t* q = p.w.packed_quants(p.pg, g, b);
  if constexpr (T == WType::Q8_0) {
    return q;
  } else {
    const __m512i m4 = _mm512_set1_epi8(15);
#pragma GCC unroll 4
    for (int c = 0; c < 4; ++c) {
      const __m512i raw = _mm512_loadu_si512(q + 64 * c);
      _mm512_store_si512(buf + 64 * c, _mm512_and_si512(raw, m4));
      _mm512_store_si512(buf + 64 * (c + 4), _mm512_and_si512(_mm512_srli_epi16(raw, 4), m4));
    }
    return buf;
  }
}

// The weights' zero point times the block's activation sum (as in the VNNI kernel).
template <WType T>
inline int32_t offset(int32_t xs) {
  return T == WType::Q4_0 ? -8 * xs : -128 * xs;
}

// fp32 chain for the rows of one A tile (rows base..base+15, those in [lo, hi) kept) against
// NG groups: acc[m - m0][j] = fma(float(C + offset), dw * dx, acc).
template <WType T, int NG>
DFLASH_AMX_TARGET inline __attribute__((always_inline)) void accumulate(const AmxArgs& p, const int32_t (*c)[16][16],
                                                                       const __m512* ws, int base, int lo, int hi,
                                                                       int m0, int64_t b, float (*acc)[2][16]) {
  for (int rr = 0; rr < 16; ++rr) {
    const int m = base + rr;
    if (m < lo || m >= hi) continue;
    const __m512i off = _mm512_set1_epi32(offset<T>(p.a.srow(m)[b]));
    const __m512 d = _mm512_set1_ps(p.a.drow(m)[b]);
#pragma GCC unroll 2
    for (int j = 0; j < NG; ++j) {
      float* a = acc[m - m0][j];
      const __m512i isum = _mm512_add_epi32(_mm512_load_si512(c[j][rr]), off);
      _mm512_store_ps(a, _mm512_fmadd_ps(_mm512_cvtepi32_ps(isum), _mm512_mul_ps(ws[j], d), _mm512_load_ps(a)));
    }
  }
}

// Rows [m0, m1) (at most 64) x groups g0, g0 + NG - 1 (NG = 1 or 2), every block.
template <WType T, int NG>
DFLASH_AMX_TARGET __attribute__((noinline)) void Strip(const AmxArgs& p, int m0, int m1, int64_t g0) {
  alignas(64) float acc[kChunkRows][2][16];
  alignas(64) int32_t cbuf[2][2][16][16];  // [A tile of the pair][group][row][output]
  alignas(64) uint8_t bbuf[2][512];
  for (int m = 0; m < m1 - m0; ++m)
    for (int j = 0; j < NG; ++j) _mm512_store_ps(acc[m][j], _mm512_setzero_ps());
  const int ntiles = (m1 - m0 + 15) / 16;
  const int64_t Kp = p.a.Kp;
  for (int64_t b = 0; b < p.pg.blocks; ++b) {
    const uint8_t* bq0 = b_tile<T>(p, g0, b, bbuf[0]);
    const uint8_t* bq1 = NG == 2 ? b_tile<T>(p, g0 + 1, b, bbuf[1]) : nullptr;
    __m512 ws[2];
    for (int j = 0; j < NG; ++j)
      ws[j] = _mm512_cvtph_ps(_mm256_loadu_si256(reinterpret_cast<const __m256i*>(p.w.packed_scales(p.pg, g0 + j, b))));
    DFLASH_AMX_BARRIER();
    DFLASH_TILE_LOADD(2, bq0, 64);
    if constexpr (NG == 2) DFLASH_TILE_LOADD(3, bq1, 64);
    DFLASH_AMX_BARRIER();  // and the next block's decode must not move above these loads
    for (int t = 0; t < ntiles; t += 2) {
      // A tile t covers the new rows [m0 + 16t, m0 + 16t + 16) up to m1; when fewer than 16
      // rows remain it starts earlier (at M - 16, rows already done are skipped below) so that
      // it never reads past the activations; M < 16 reads the zero-padded copy.
      const int lo0 = m0 + 16 * t, lo1 = lo0 + 16;
      const int base0 = p.pad ? 0 : (lo0 + 16 <= p.M ? lo0 : p.M - 16);
      const bool two = t + 1 < ntiles;
      const int base1 = two ? (lo1 + 16 <= p.M ? lo1 : p.M - 16) : 0;
      DFLASH_TILE_LOADD(0, a_tile(p, base0, b), Kp);
      DFLASH_TILE_ZERO(4);
      DFLASH_TILE_DPBSUD(4, 0, 2);
      DFLASH_TILE_STORED(4, cbuf[0][0], 64);
      if constexpr (NG == 2) {
        DFLASH_TILE_ZERO(5);
        DFLASH_TILE_DPBSUD(5, 0, 3);
        DFLASH_TILE_STORED(5, cbuf[0][1], 64);
      }
      if (two) {
        DFLASH_TILE_LOADD(1, a_tile(p, base1, b), Kp);
        DFLASH_TILE_ZERO(6);
        DFLASH_TILE_DPBSUD(6, 1, 2);
        DFLASH_TILE_STORED(6, cbuf[1][0], 64);
        if constexpr (NG == 2) {
          DFLASH_TILE_ZERO(7);
          DFLASH_TILE_DPBSUD(7, 1, 3);
          DFLASH_TILE_STORED(7, cbuf[1][1], 64);
        }
      }
      accumulate<T, NG>(p, cbuf[0], ws, base0, lo0, lo0 + 16 < m1 ? lo0 + 16 : m1, m0, b, acc);
      if (two) accumulate<T, NG>(p, cbuf[1], ws, base1, lo1, lo1 + 16 < m1 ? lo1 + 16 : m1, m0, b, acc);
    }
  }
  for (int j = 0; j < NG; ++j) {
    const int64_t n = (g0 + j) * kPackRows;
    const int64_t valid = p.N - n < kPackRows ? p.N - n : kPackRows;
    if (valid <= 0) break;  // the zero rows that pad the last set of 4 groups
    const __mmask16 k = valid >= 16 ? __mmask16(0xFFFF) : __mmask16((1u << valid) - 1);
    for (int m = m0; m < m1; ++m) _mm512_mask_storeu_ps(p.y + int64_t(m) * p.N + n, k, _mm512_load_ps(acc[m - m0][j]));
  }
}

template <WType T>
DFLASH_AMX_TARGET __attribute__((noinline)) void Range(const AmxArgs& p, int64_t g0, int64_t g1) {
  DFLASH_TILE_LOADCONFIG(&kTileConfig);
  for (int mc = 0; mc < p.M; mc += kChunkRows) {
    const int mend = mc + kChunkRows < p.M ? mc + kChunkRows : p.M;
    for (int64_t g = g0; g < g1; g += 2) {
      if (g + 2 <= g1) Strip<T, 2>(p, mc, mend, g);
      else Strip<T, 1>(p, mc, mend, g);
    }
  }
  DFLASH_TILE_RELEASE();
}

#pragma GCC diagnostic pop
}  // namespace

void qmatmul_packed_range_amx(const QuantActs& a, int M, const WeightMatrix& w, float* y, int64_t g0, int64_t g1) {
  if (M <= 0 || g0 >= g1) return;
  thread_local std::vector<int8_t> pad;
  const int8_t* padp = nullptr;
  if (M < 16) {  // a tile reads 16 rows: give it M real ones and zeros
    pad.assign(size_t(16) * size_t(a.Kp), 0);
    std::memcpy(pad.data(), a.qrow(0), size_t(M) * size_t(a.Kp));
    padp = pad.data();
  }
  const AmxArgs p{a, M, w, packed_geometry(w.type, w.rows, w.cols), y, w.rows, padp};
  if (w.type == WType::Q4_0) Range<WType::Q4_0>(p, g0, g1);
  else if (w.type == WType::Q8_0) Range<WType::Q8_0>(p, g0, g1);
}

#else  // not x86-64 Linux: no AMX

bool amx_int8_available() { return false; }
void qmatmul_packed_range_amx(const QuantActs&, int, const WeightMatrix&, float*, int64_t, int64_t) {
  std::abort();  // callers ask amx_int8_available() first
}

#endif

}  // namespace dflash
