// Fast int8 matmul for Q8_0/Q4_0 weights in the interleaved layout (weight_matrix.h), the
// definition being the one in quant_act.h: one fp32 fma chain per output over the blocks.
//
// Each 64-byte chunk of a group is 4 weights of each of its 16 rows; broadcasting 4
// activation bytes of a row against it gives 16 lanes of int8 dot products (VNNI dpbusd on
// AVX3_DL; maddubs + madd on AVX2), summed exactly in int32 lanes that start at the
// weights' offset times the block's activation sum (Q4_0: -8 xs, Q8_0: -128 xs, since the
// packed bytes are unsigned). Then one convert and one fma per 16 outputs and block.
//   - Decode and batches up to 8 rows, 16 for Q8_0 (Tile): up to 3 rows x 4 groups of
//     accumulators in registers, the 4 groups read as one sequential stream with software
//     prefetch; 4-5 rows in one pass, their fp32 sums in L1; more in passes of 3-4 rows, the
//     later ones from L2.
//   - Larger batches (TileCol): one block of 2 groups decoded into registers once, then
//     every row of a chunk of 64 goes through it, its accumulators in L1. Bound by the dot
//     products: `dflash bench` prints their rate on weights in cache and the bound it implies.
#define HWY_WANT_AVX3_DL  // VNNI
#undef HWY_TARGET_INCLUDE
#define HWY_TARGET_INCLUDE "kernels/cpu/qmatmul_packed_hwy.cpp"
#include <hwy/foreach_target.h>  // IWYU pragma: keep
#include <hwy/highway.h>

#include <algorithm>
#include <cstring>

#include "kernels/cpu/quant_act.h"
#include "kernels/numeric.h"

#undef DFLASH_PX86
#if HWY_TARGET == HWY_AVX2 || HWY_TARGET == HWY_AVX3 || HWY_TARGET == HWY_AVX3_DL
#include <immintrin.h>
#define DFLASH_PX86 1
#else
#define DFLASH_PX86 0
#endif

HWY_BEFORE_NAMESPACE();
#if HWY_TARGET == HWY_AVX3_DL
#pragma GCC push_options
#pragma GCC target("avx512vnni")
#endif
namespace dflash {
namespace HWY_NAMESPACE {

struct PackedArgs {
  const QuantActs& a;
  const WeightMatrix& w;
  PackedGeometry pg;
  float* y;
  int64_t N;
};

HWY_INLINE int32_t Load4(const int8_t* p) {
  int32_t v;
  std::memcpy(&v, p, 4);
  return v;
}

// The quantized rows m0.. of a register tile: values, block scales and block sums.
template <int MR>
struct RowPtrs {
  const int8_t* x[MR];
  const float* dx[MR];
  const int32_t* xs[MR];
  RowPtrs(const QuantActs& a, int m0) {
#pragma GCC unroll 16
    for (int m = 0; m < MR; ++m) {
      x[m] = a.qrow(m0 + m);
      dx[m] = a.drow(m0 + m);
      xs[m] = a.srow(m0 + m);
    }
  }
};

// The weights' zero point times the block's activation sum: where each int32 lane starts.
template <WType T>
HWY_INLINE int32_t Offset(int32_t xs) {
  return T == WType::Q4_0 ? -8 * xs : -128 * xs;
}

#if HWY_TARGET == HWY_AVX3_DL
#ifndef DFLASH_PF
#define DFLASH_PF 4608
#endif
#ifndef DFLASH_PF_HINT
#define DFLASH_PF_HINT _MM_HINT_T0
#endif
constexpr int kPrefetch = DFLASH_PF;
// TileCol reads two of each set's four groups, a strided walk that the hardware prefetcher
// follows less well, and spends longer on each block (every row of the batch goes through
// it): it asks for its lines twice as far ahead.
constexpr int kPrefetchCol = 2 * kPrefetch;

// The first pass over weights streams them from memory: ask for the lines a few blocks ahead
// of each group (the hardware prefetcher alone leaves the core waiting on most of them).
template <WType T, int NG, int kDist = kPrefetch>
HWY_INLINE void Prefetch(const uint8_t* const* q) {
#pragma GCC unroll 16
  for (int g = 0; g < NG; ++g)
#pragma GCC unroll 16
    for (int c = 0; c < (T == WType::Q4_0 ? 5 : 9); ++c)
      _mm_prefetch(reinterpret_cast<const char*>(q[g]) + kDist + 64 * c, DFLASH_PF_HINT);
}

template <WType T, int MR, int NG>
HWY_NOINLINE void Tile(const PackedArgs& p, int m0, int64_t g0, bool stream) {
  const RowPtrs<MR> rows(p.a, m0);
  const int8_t* const* x = rows.x;
  const float* const* dx = rows.dx;
  const int32_t* const* xs = rows.xs;
  // More than 12 int32 sums leave no registers for the fp32 ones: those then live in L1, one
  // load and one store per block beside the block's MR x NG x 8 dot products.
  constexpr bool kAccL1 = MR * NG > 12;
  __m512 acc[MR][NG];
  alignas(64) float accm[kAccL1 ? MR : 1][kAccL1 ? NG : 1][16];
  #pragma GCC unroll 16
  for (int m = 0; m < MR; ++m)
    #pragma GCC unroll 16
    for (int g = 0; g < NG; ++g) {
      if constexpr (kAccL1) _mm512_store_ps(accm[m][g], _mm512_setzero_ps());
      else acc[m][g] = _mm512_setzero_ps();
    }
  const __m512i m4 = _mm512_set1_epi8(15);
  for (int64_t b = 0; b < p.pg.blocks; ++b) {
    __m512i ia[MR][NG];
    #pragma GCC unroll 16
    for (int m = 0; m < MR; ++m) {
      const __m512i off = _mm512_set1_epi32(Offset<T>(xs[m][b]));
      #pragma GCC unroll 16
      for (int g = 0; g < NG; ++g) ia[m][g] = off;
    }
    const uint8_t* q[NG];
    #pragma GCC unroll 16
    for (int g = 0; g < NG; ++g) q[g] = p.w.packed_quants(p.pg, g0 + g, b);
    if (stream) Prefetch<T, NG, NG < kPackGroupSet ? kPrefetchCol : kPrefetch>(q);  // fewer groups: a strided walk
    if constexpr (T == WType::Q4_0) {
      #pragma GCC unroll 16
      for (int c = 0; c < 4; ++c) {
        __m512i lo[NG], hi[NG];
        #pragma GCC unroll 16
        for (int g = 0; g < NG; ++g) {
          const __m512i raw = _mm512_load_si512(q[g] + 64 * c);
          lo[g] = _mm512_and_si512(raw, m4);
          hi[g] = _mm512_and_si512(_mm512_srli_epi16(raw, 4), m4);
        }
        #pragma GCC unroll 16
        for (int m = 0; m < MR; ++m) {
          const __m512i xl = _mm512_set1_epi32(Load4(x[m] + 32 * b + 4 * c));
          const __m512i xh = _mm512_set1_epi32(Load4(x[m] + 32 * b + 16 + 4 * c));
          #pragma GCC unroll 16
          for (int g = 0; g < NG; ++g) {
            ia[m][g] = _mm512_dpbusd_epi32(ia[m][g], lo[g], xl);
            ia[m][g] = _mm512_dpbusd_epi32(ia[m][g], hi[g], xh);
          }
        }
      }
    } else {
      #pragma GCC unroll 16
      for (int c = 0; c < 8; ++c) {
        __m512i wv[NG];
        #pragma GCC unroll 16
        for (int g = 0; g < NG; ++g) wv[g] = _mm512_load_si512(q[g] + 64 * c);
        #pragma GCC unroll 16
        for (int m = 0; m < MR; ++m) {
          const __m512i xv = _mm512_set1_epi32(Load4(x[m] + 32 * b + 4 * c));
          #pragma GCC unroll 16
          for (int g = 0; g < NG; ++g) ia[m][g] = _mm512_dpbusd_epi32(ia[m][g], wv[g], xv);
        }
      }
    }
    __m512 ws[NG];
    #pragma GCC unroll 16
    for (int g = 0; g < NG; ++g)
      ws[g] = _mm512_cvtph_ps(_mm256_load_si256(reinterpret_cast<const __m256i*>(p.w.packed_scales(p.pg, g0 + g, b))));
    #pragma GCC unroll 16
    for (int m = 0; m < MR; ++m) {
      const __m512 d = _mm512_set1_ps(dx[m][b]);
      #pragma GCC unroll 16
      for (int g = 0; g < NG; ++g) {
        if constexpr (kAccL1)
          _mm512_store_ps(accm[m][g], _mm512_fmadd_ps(_mm512_cvtepi32_ps(ia[m][g]), _mm512_mul_ps(ws[g], d),
                                                      _mm512_load_ps(accm[m][g])));
        else
          acc[m][g] = _mm512_fmadd_ps(_mm512_cvtepi32_ps(ia[m][g]), _mm512_mul_ps(ws[g], d), acc[m][g]);
      }
    }
  }
  #pragma GCC unroll 16
  for (int g = 0; g < NG; ++g) {
    const int64_t n = (g0 + g) * kPackRows;
    const int64_t valid = std::min<int64_t>(kPackRows, p.N - n);
    if (valid <= 0) break;  // the zero rows that pad the last set of 4 groups
    const __mmask16 k = valid >= 16 ? __mmask16(0xFFFF) : __mmask16((1u << valid) - 1);
    #pragma GCC unroll 16
    for (int m = 0; m < MR; ++m)
      _mm512_mask_storeu_ps(p.y + int64_t(m0 + m) * p.N + n, k, kAccL1 ? _mm512_load_ps(accm[m][g]) : acc[m][g]);
  }
}

// Batches (M >= 9, Q8_0 M >= 17; smaller ones go through Tile): the weights of NG groups for one block are decoded once into registers
// and every row of [m0, m1) goes through them, so a batch costs one read and one decode of
// the weights whatever its size. The rows' fp32 accumulators do not fit in registers and
// live in L1; each is still one fma chain in block order.
constexpr int kColRows = kPackedOnePassRows;
template <WType T, int NG>
HWY_NOINLINE void TileCol(const PackedArgs& p, int m0, int m1, int64_t g0, bool stream) {
  alignas(64) float acc[kColRows][NG][16];
  for (int m = 0; m < m1 - m0; ++m)
#pragma GCC unroll 16
    for (int g = 0; g < NG; ++g) _mm512_store_ps(acc[m][g], _mm512_setzero_ps());
  const __m512i m4 = _mm512_set1_epi8(15);
  for (int64_t b = 0; b < p.pg.blocks; ++b) {
    const uint8_t* q[NG];
#pragma GCC unroll 16
    for (int g = 0; g < NG; ++g) q[g] = p.w.packed_quants(p.pg, g0 + g, b);
    if (stream) Prefetch<T, NG, kPrefetchCol>(q);
    // w[g][s] holds 4 weights of each of the 16 rows at k = 4s..4s+3 (Q4_0's high nibbles of
    // chunk c are k = 16 + 4c, i.e. s = c + 4).
    __m512i w[NG][8];
    __m512 ws[NG];
#pragma GCC unroll 16
    for (int g = 0; g < NG; ++g) {
      if constexpr (T == WType::Q4_0) {
#pragma GCC unroll 16
        for (int c = 0; c < 4; ++c) {
          const __m512i raw = _mm512_load_si512(q[g] + 64 * c);
          w[g][c] = _mm512_and_si512(raw, m4);
          w[g][c + 4] = _mm512_and_si512(_mm512_srli_epi16(raw, 4), m4);
        }
      } else {
#pragma GCC unroll 16
        for (int c = 0; c < 8; ++c) w[g][c] = _mm512_load_si512(q[g] + 64 * c);
      }
      ws[g] = _mm512_cvtph_ps(_mm256_load_si256(reinterpret_cast<const __m256i*>(p.w.packed_scales(p.pg, g0 + g, b))));
    }
    for (int m = m0; m < m1; ++m) {
      const int8_t* xb = p.a.qrow(m) + 32 * b;
      const __m512i off = _mm512_set1_epi32(Offset<T>(p.a.srow(m)[b]));
      __m512i ia[NG];
#pragma GCC unroll 16
      for (int g = 0; g < NG; ++g) ia[g] = off;
#pragma GCC unroll 16
      for (int s4 = 0; s4 < 8; ++s4) {
        const __m512i xv = _mm512_set1_epi32(Load4(xb + 4 * s4));
#pragma GCC unroll 16
        for (int g = 0; g < NG; ++g) ia[g] = _mm512_dpbusd_epi32(ia[g], w[g][s4], xv);
      }
      const __m512 d = _mm512_set1_ps(p.a.drow(m)[b]);
#pragma GCC unroll 16
      for (int g = 0; g < NG; ++g) {
        float* a = acc[m - m0][g];
        _mm512_store_ps(a, _mm512_fmadd_ps(_mm512_cvtepi32_ps(ia[g]), _mm512_mul_ps(ws[g], d), _mm512_load_ps(a)));
      }
    }
  }
#pragma GCC unroll 16
  for (int g = 0; g < NG; ++g) {
    const int64_t n = (g0 + g) * kPackRows;
    const int64_t valid = std::min<int64_t>(kPackRows, p.N - n);
    if (valid <= 0) break;
    const __mmask16 k = valid >= 16 ? __mmask16(0xFFFF) : __mmask16((1u << valid) - 1);
    for (int m = m0; m < m1; ++m) _mm512_mask_storeu_ps(p.y + int64_t(m) * p.N + n, k, _mm512_load_ps(acc[m - m0][g]));
  }
}
constexpr int kMaxMR = 3, kMaxNG = 4;

#elif DFLASH_PX86
// AVX2 (and AVX-512 without VNNI): 256-bit halves of each chunk, 8 rows a register. u8 x s8
// pairs via maddubs, which saturates at 32767: Q4_0's 0..15 never reach it, and Q8_0 is made
// signed again and multiplied as |w| x sign(x, w) (at most 128 * 127 * 2), its offset then 0.
template <WType T, int MR, int NG>
HWY_NOINLINE void Tile(const PackedArgs& p, int m0, int64_t g0, bool stream) {
  constexpr int NH = 2 * NG;  // half-groups of 8 rows
  const RowPtrs<MR> rows(p.a, m0);
  const int8_t* const* x = rows.x;
  const float* const* dx = rows.dx;
  const int32_t* const* xs = rows.xs;
  __m256 acc[MR][NH];
  #pragma GCC unroll 16
  for (int m = 0; m < MR; ++m)
    #pragma GCC unroll 16
    for (int h = 0; h < NH; ++h) acc[m][h] = _mm256_setzero_ps();
  const __m256i m4 = _mm256_set1_epi8(15), ones = _mm256_set1_epi16(1), flip = _mm256_set1_epi8(char(0x80));
  auto dot = [&](__m256i u, __m256i s) { return _mm256_madd_epi16(_mm256_maddubs_epi16(u, s), ones); };
  for (int64_t b = 0; b < p.pg.blocks; ++b) {
    __m256i ia[MR][NH];
    #pragma GCC unroll 16
    for (int m = 0; m < MR; ++m) {
      const __m256i off = _mm256_set1_epi32(T == WType::Q4_0 ? Offset<T>(xs[m][b]) : 0);
      #pragma GCC unroll 16
      for (int h = 0; h < NH; ++h) ia[m][h] = off;
    }
    const uint8_t* q[NG];
    #pragma GCC unroll 16
    for (int g = 0; g < NG; ++g) q[g] = p.w.packed_quants(p.pg, g0 + g, b);
    const int chunks = T == WType::Q4_0 ? 4 : 8;
    #pragma GCC unroll 16
    for (int c = 0; c < chunks; ++c) {
      __m256i lo[NH], hi[NH];
      #pragma GCC unroll 16
      for (int h = 0; h < NH; ++h) {
        const __m256i raw = _mm256_load_si256(reinterpret_cast<const __m256i*>(q[h / 2] + 64 * c + 32 * (h % 2)));
        if constexpr (T == WType::Q4_0) {
          lo[h] = _mm256_and_si256(raw, m4);
          hi[h] = _mm256_and_si256(_mm256_srli_epi16(raw, 4), m4);
        } else {
          lo[h] = _mm256_xor_si256(raw, flip);  // the signed weights
        }
      }
      #pragma GCC unroll 16
      for (int m = 0; m < MR; ++m) {
        const __m256i xl = _mm256_set1_epi32(Load4(x[m] + 32 * b + 4 * c));
        if constexpr (T == WType::Q4_0) {
          const __m256i xh = _mm256_set1_epi32(Load4(x[m] + 32 * b + 16 + 4 * c));
          #pragma GCC unroll 16
          for (int h = 0; h < NH; ++h)
            ia[m][h] = _mm256_add_epi32(ia[m][h], _mm256_add_epi32(dot(lo[h], xl), dot(hi[h], xh)));
        } else {
          #pragma GCC unroll 16
          for (int h = 0; h < NH; ++h)
            ia[m][h] = _mm256_add_epi32(ia[m][h], dot(_mm256_abs_epi8(lo[h]), _mm256_sign_epi8(xl, lo[h])));
        }
      }
    }
    __m256 ws[NH];
    #pragma GCC unroll 16
    for (int h = 0; h < NH; ++h)
      ws[h] = _mm256_cvtph_ps(_mm_load_si128(reinterpret_cast<const __m128i*>(p.w.packed_scales(p.pg, g0 + h / 2, b) + 8 * (h % 2))));
    #pragma GCC unroll 16
    for (int m = 0; m < MR; ++m) {
      const __m256 d = _mm256_set1_ps(dx[m][b]);
      #pragma GCC unroll 16
      for (int h = 0; h < NH; ++h)
        acc[m][h] = _mm256_fmadd_ps(_mm256_cvtepi32_ps(ia[m][h]), _mm256_mul_ps(ws[h], d), acc[m][h]);
    }
  }
  #pragma GCC unroll 16
  for (int h = 0; h < NH; ++h) {
    const int64_t n = (g0 + h / 2) * kPackRows + 8 * (h % 2);
    #pragma GCC unroll 16
    for (int m = 0; m < MR; ++m) {
      float* out = p.y + int64_t(m0 + m) * p.N + n;
      if (n + 8 <= p.N) {
        _mm256_storeu_ps(out, acc[m][h]);
      } else if (n < p.N) {
        alignas(32) float t[8];
        _mm256_store_ps(t, acc[m][h]);
        std::memcpy(out, t, sizeof(float) * size_t(p.N - n));
      }
    }
  }
}
constexpr int kMaxMR = 2, kMaxNG = 1;

#else
// Portable: the definition in plain code (other CPUs; an int8 dot-product op is not in the
// Highway version Debian 12 ships; ARM cores with dotprod take qmatmul_packed_neon.cpp).
template <WType T, int MR, int NG>
HWY_NOINLINE void Tile(const PackedArgs& p, int m0, int64_t g0, bool stream) {
  for (int m = m0; m < m0 + MR; ++m)
    for (int64_t g = g0; g < g0 + NG; ++g)
      for (int r = 0; r < kPackRows; ++r) {
        const int64_t n = g * kPackRows + r;
        if (n >= p.N) break;
        float acc = 0.0f;
        for (int64_t b = 0; b < p.pg.blocks; ++b) {
          const uint8_t* q = p.w.packed_quants(p.pg, g, b);
          const int8_t* x = p.a.qrow(m) + 32 * b;
          int32_t isum = Offset<T>(p.a.srow(m)[b]);
          for (int i = 0; i < 32; ++i) {
            int u;
            if constexpr (T == WType::Q4_0) {
              const uint8_t byte = q[64 * ((i % 16) / 4) + 4 * r + i % 4];
              u = i < 16 ? byte & 15 : byte >> 4;
            } else {
              u = q[64 * (i / 4) + 4 * r + i % 4];
            }
            isum += u * int(x[i]);
          }
          acc = block_fma(isum, f16_to_f32(p.w.packed_scales(p.pg, g, b)[r]), p.a.drow(m)[b], acc);
        }
        p.y[int64_t(m) * p.N + n] = acc;
      }
}
constexpr int kMaxMR = 1, kMaxNG = 1;
#endif

template <WType T, int NG>
HWY_INLINE void TileRows(const PackedArgs& p, int m0, int mr, int64_t g0, bool stream);

#if HWY_TARGET != HWY_AVX3_DL
constexpr int kColRows = kPackedOnePassRows;
// Without VNNI the register tile serves batches too, kMaxMR rows at a time.
template <WType T, int NG>
void TileCol(const PackedArgs& p, int m0, int m1, int64_t g0, bool stream) {
  for (int g = 0; g < NG; ++g)
    for (int m = m0; m < m1; m += kMaxMR) TileRows<T, 1>(p, m, std::min(kMaxMR, m1 - m), g0 + g, stream);
}
#endif

template <WType T, int NG>
HWY_INLINE void TileRows(const PackedArgs& p, int m0, int mr, int64_t g0, bool stream) {
  static_assert(kMaxMR <= 4);
  switch (mr) {
    case 1: return Tile<T, 1, NG>(p, m0, g0, stream);
    case 2: if constexpr (kMaxMR >= 2) return Tile<T, 2, NG>(p, m0, g0, stream); break;
    case 3: if constexpr (kMaxMR >= 3) return Tile<T, 3, NG>(p, m0, g0, stream); break;
    default: if constexpr (kMaxMR >= 4) return Tile<T, 4, NG>(p, m0, g0, stream); break;
  }
}

// Groups [g0, g1) for every activation row.
template <WType T>
void PackedRange(const QuantActs& a, int M, const WeightMatrix& w, float* y, int64_t g0, int64_t g1) {
  const PackedArgs p{a, w, packed_geometry(w.type, w.rows, w.cols), y, w.rows};
#if HWY_TARGET == HWY_AVX3_DL
  // A verify of 4-5 rows in one pass over the weights: split as 2 + 2 or 3 + 2 rows, the
  // second pass repeats the loads (and Q4_0's nibble decode) while the stream idles. Beyond 12
  // int32 sums the fp32 ones go to L1 (Tile's kAccL1). Q4_0's 5 rows walk 2 groups at a time,
  // since 5 x 4 sums and its decoded nibbles do not fit the registers; Q8_0's do, and its
  // stream, twice as long per dot product, was slower over the strided 2-group walk. Measured
  // with `dflash bench --shape qwen2.5-0.5b qwen3-1.7b --weights q8 q4 --prompt-tokens 64
  // --gen-tokens 16`, this against the split in ABBA order (median of 4-6 pairs): K = 5 0.78-0.81x
  // the time for Q8_0, 0.98-1.02x for Q4_0; K = 4 0.83-0.94x and 0.92-0.97x. Six rows stay 3 + 3.
  if (M == 4 || M == 5) {
    for (int64_t g = g0; g < g1; g += 4) {  // tasks hold whole sets of 4 groups
      if (M == 4) Tile<T, 4, 4>(p, 0, g, true);
      else if (T == WType::Q8_0) Tile<T, 5, 4>(p, 0, g, true);
      else Tile<T, 5, 2>(p, 0, g, true), Tile<T, 5, 2>(p, 0, g + 2, true);
    }
    return;
  }
  // 7-8 rows (a verify of a block of 8, DFlash's common size), and for Q8_0 up to 16: passes
  // of 4 rows over the sequential stream, the later ones finding the set in L2. TileCol walks
  // only 2 of each set's 4 groups at a time, a strided stream that left K=8 memory-bound at
  // twice its bound. `dflash bench --shape qwen2.5-0.5b qwen3-1.7b --weights q8 q4
  // --prompt-tokens 64 --gen-tokens 16` in ABBA order (2 pairs each), against TileCol: K=8
  // 0.88-0.95x the time; K=16 0.93-0.95x for Q8_0, 0.99-1.12x for Q4_0 (whose nibbles each pass
  // decodes again), which stays on TileCol beyond 8 rows.
  if (M >= 7 && M <= (T == WType::Q8_0 ? 16 : 8)) {
    for (int64_t g = g0; g < g1; g += 4)
      for (int m = 0; m < M; m += 4) {
        const int mr = std::min(4, M - m);
        if (mr == 4) Tile<T, 4, 4>(p, m, g, m == 0);
        else TileRows<T, 4>(p, m, mr, g, false);
      }
    return;
  }
#endif
  if (M <= 6 && kMaxNG >= 4) {
    // Decode, 2-3 rows and 6 rows (3 + 3): four groups at once in one sequential stream, the
    // accumulators of up to three rows in registers (3 x 4 int32 sums and 3 x 4 fp32 sums:
    // 24 of the 32 vector registers; Q8_0's weights and broadcasts fit beside them, Q4_0's
    // decoded nibbles make GCC spill a few to the stack); the second 3 rows find the set in cache.
    for (int64_t g = g0; g < g1; g += 4)
      for (int m = 0, mr; m < M; m += mr) {
        mr = std::min(kMaxMR, M - m);
        if (g + 4 <= g1) TileRows<T, kMaxNG>(p, m, mr, g, m == 0);  // always: tasks hold whole sets of 4 groups
        else for (int64_t gg = g; gg < g1; ++gg) TileRows<T, 1>(p, m, mr, gg, m == 0);
      }
    return;
  }
  // Batches (and everything without VNNI): the first chunk of rows streams each pair of
  // groups from memory; later chunks (M > 64) find the task's weights in L2.
  for (int mc = 0; mc < M; mc += kColRows) {
    const int mend = std::min(M, mc + kColRows);
    for (int64_t g = g0; g < g1; g += 2) {
      if (g + 2 <= g1) TileCol<T, 2>(p, mc, mend, g, mc == 0);
      else TileCol<T, 1>(p, mc, mend, g, mc == 0);
    }
  }
}

void PackedRangeDispatch(const QuantActs& a, int M, const WeightMatrix& w, float* y, int64_t g0, int64_t g1) {
  if (w.type == WType::Q4_0) return PackedRange<WType::Q4_0>(a, M, w, y, g0, g1);
  if (w.type == WType::Q8_0) return PackedRange<WType::Q8_0>(a, M, w, y, g0, g1);
}

}  // namespace HWY_NAMESPACE
}  // namespace dflash
#if HWY_TARGET == HWY_AVX3_DL
#pragma GCC pop_options
#endif
HWY_AFTER_NAMESPACE();

#if HWY_ONCE
namespace dflash {
HWY_EXPORT(PackedRangeDispatch);

void qmatmul_packed_range(const QuantActs& a, int M, const WeightMatrix& w, float* y, int64_t g0, int64_t g1) {
  if (neon_dotprod_available()) return qmatmul_packed_range_dotprod(a, M, w, y, g0, g1);
  if (M >= kAmxMinRows && amx_int8_available()) return qmatmul_packed_range_amx(a, M, w, y, g0, g1);
  HWY_DYNAMIC_DISPATCH(PackedRangeDispatch)(a, M, w, y, g0, g1);
}
}  // namespace dflash
#endif
