// The int8 matmul for matrices in GGUF's row layout (the definition is in quant_act.h): the
// k-quants, and Q8_0/Q4_0 matrices that were not packed (models pack theirs at load, and
// qmatmul_packed_hwy.cpp is the fast path for those). Also the entry point that quantizes the
// activations and splits the work of one or several products over the pool.
//
// Per weight row, a group of 8 blocks (256 weights, one k-quant super-block) is decoded once
// into unsigned bytes in L1 and then multiplied with up to 32 activation rows, so each weight
// byte is streamed from memory once per 32 rows. The eight block sums of a row come out of
// int8 dot products (AVX2 maddubs, or VNNI dpbusd on AVX3_DL) as exact integers and are
// folded into one 8-lane fp32 accumulator per row, lane j holding acc[j] of the k-quants'
// definition (Q8_0/Q4_0: into their one fma chain, block by block).
// Highway 1.0 has no int8 dot-product op, so on x86 the dot products are intrinsics inside
// Highway's per-target compilation; other targets compute the same integers with plain code.
#define HWY_WANT_AVX3_DL  // VNNI
#undef HWY_TARGET_INCLUDE
#define HWY_TARGET_INCLUDE "kernels/cpu/qmatmul_hwy.cpp"
#include <hwy/foreach_target.h>  // IWYU pragma: keep
#include <hwy/highway.h>

#include <algorithm>
#include <cstring>
#include <stdexcept>
#include <string>

#include "kernels/cpu/quant_act.h"
#include "kernels/numeric.h"

#undef DFLASH_QX86
#if HWY_TARGET == HWY_AVX2 || HWY_TARGET == HWY_AVX3 || HWY_TARGET == HWY_AVX3_DL
#include <immintrin.h>
#define DFLASH_QX86 1
#else
#define DFLASH_QX86 0
#endif

HWY_BEFORE_NAMESPACE();
#if HWY_TARGET == HWY_AVX3_DL
// Highway's AVX3_DL target string names avxvnni (VEX); the EVEX form is what AVX3_DL CPUs
// are guaranteed to have (Highway checks AVX512-VNNI for this target).
#pragma GCC push_options
#pragma GCC target("avx512vnni")
#endif
namespace dflash {
namespace HWY_NAMESPACE {
namespace hn = hwy::HWY_NAMESPACE;

// ---------------------------------------------------------------------------------------
// Activation quantization, one block of 32 at a time.
// Rows [r0, r1) of an already sized QuantActs.
void QuantizeActs(const float* x, int r0, int r1, int64_t K, QuantActs& a) {
  const hn::CappedTag<float, 8> df;
  const hn::Rebind<int32_t, decltype(df)> di;
  const hn::Rebind<int8_t, decltype(df)> d8;
  const int64_t L = int64_t(hn::Lanes(df));
  const auto lo = hn::Set(di, -127), hi = hn::Set(di, 127);
  for (int r = r0; r < r1; ++r) {
    const float* xr = x + int64_t(r) * K;
    int8_t* q = a.q.data() + size_t(r) * size_t(a.Kp);
    float* dd = a.d.data() + size_t(r) * size_t(a.Kp / 32);
    int32_t* ss = a.s.data() + size_t(r) * size_t(a.Kp / 32);
    int16_t* s16 = a.s16.data() + size_t(r) * size_t(a.Kp / 16);
    for (int64_t b = 0; b < K / 32; ++b) {
      const float* v = xr + b * 32;
      auto m = hn::Zero(df);
      for (int64_t i = 0; i < 32; i += L) m = hn::Max(m, hn::Abs(hn::LoadU(df, v + i)));
      const float amax = hn::GetLane(hn::MaxOfLanes(df, m));
      const auto id = hn::Set(df, amax > 0 ? 127.0f / amax : 0.0f);
      dd[b] = amax / 127.0f;
      int half[2] = {0, 0};
      for (int64_t i = 0; i < 32; i += L) {
        const auto qi = hn::Min(hi, hn::Max(lo, hn::NearestInt(hn::Mul(hn::LoadU(df, v + i), id))));
        hn::StoreU(hn::DemoteTo(d8, qi), d8, q + b * 32 + i);
        half[i / 16] += int(hn::GetLane(hn::SumOfLanes(di, qi)));
      }
      s16[2 * b] = int16_t(half[0]);
      s16[2 * b + 1] = int16_t(half[1]);
      ss[b] = half[0] + half[1];
    }
  }
}

// ---------------------------------------------------------------------------------------
// One decoded group of 8 blocks of a weight row.
struct Group {
  alignas(32) uint8_t u[256];   // unsigned weight bytes (|w| for Q8_0)
  alignas(32) int8_t w[256];    // Q8_0: the signed weights (their signs)
  alignas(32) float ws[8];      // Q8_0/Q4_0: block scales
  alignas(32) int32_t sc[8];    // Q4_K: sub-block scales
  alignas(32) int32_t mn[8];    // Q4_K: sub-block mins
  alignas(32) int16_t scv[8][16];  // Q6_K: per block, 8 x scale of each 16-half
  alignas(32) int16_t sc16[16];    // Q6_K: the 16 scales
  float d = 0, dmin = 0;
  int nblk = 8;  // real blocks in this group (the rest are zero padding)
};

template <WType T>
HWY_INLINE void Decode(const uint8_t* row, int64_t g, int64_t nb, Group& G) {
  if constexpr (T == WType::Q8_0 || T == WType::Q4_0) {
    G.nblk = int(std::min<int64_t>(8, nb - g * 8));
    for (int j = 0; j < 8; ++j) {
      if (j >= G.nblk) {
        std::memset(G.u + 32 * j, 0, 32);
        std::memset(G.w + 32 * j, 0, 32);
        G.ws[j] = 0.0f;
        continue;
      }
      const int64_t b = g * 8 + j;
      if constexpr (T == WType::Q8_0) {
        const BlockQ8_0& blk = reinterpret_cast<const BlockQ8_0*>(row)[b];
        G.ws[j] = f16_to_f32(blk.d);
#if DFLASH_QX86
        const __m256i v = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(blk.qs));
        _mm256_store_si256(reinterpret_cast<__m256i*>(G.w + 32 * j), v);
        _mm256_store_si256(reinterpret_cast<__m256i*>(G.u + 32 * j), _mm256_abs_epi8(v));
#else
        for (int i = 0; i < 32; ++i) G.w[32 * j + i] = blk.qs[i];
#endif
      } else {
        const BlockQ4_0& blk = reinterpret_cast<const BlockQ4_0*>(row)[b];
        G.ws[j] = f16_to_f32(blk.d);
#if DFLASH_QX86
        const __m128i v = _mm_loadu_si128(reinterpret_cast<const __m128i*>(blk.qs));
        const __m128i m4 = _mm_set1_epi8(15);
        _mm_store_si128(reinterpret_cast<__m128i*>(G.u + 32 * j), _mm_and_si128(v, m4));
        _mm_store_si128(reinterpret_cast<__m128i*>(G.u + 32 * j + 16), _mm_and_si128(_mm_srli_epi16(v, 4), m4));
#else
        for (int i = 0; i < 16; ++i) {
          G.u[32 * j + i] = blk.qs[i] & 15;
          G.u[32 * j + 16 + i] = blk.qs[i] >> 4;
        }
#endif
      }
    }
  } else if constexpr (T == WType::Q4_K) {
    const BlockQ4_K& blk = reinterpret_cast<const BlockQ4_K*>(row)[g];
    G.nblk = 8;
    G.d = f16_to_f32(blk.d);
    G.dmin = f16_to_f32(blk.dmin);
    int sc[8], mn[8];
    q4_k_scales(blk.scales, sc, mn);
    for (int j = 0; j < 8; ++j) G.sc[j] = sc[j], G.mn[j] = mn[j];
#if DFLASH_QX86
    const __m256i m4 = _mm256_set1_epi8(15);
    for (int c = 0; c < 4; ++c) {
      const __m256i v = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(blk.qs + 32 * c));
      _mm256_store_si256(reinterpret_cast<__m256i*>(G.u + 64 * c), _mm256_and_si256(v, m4));
      _mm256_store_si256(reinterpret_cast<__m256i*>(G.u + 64 * c + 32), _mm256_and_si256(_mm256_srli_epi16(v, 4), m4));
    }
#else
    for (int c = 0; c < 4; ++c)
      for (int i = 0; i < 32; ++i) {
        G.u[64 * c + i] = blk.qs[32 * c + i] & 15;
        G.u[64 * c + 32 + i] = blk.qs[32 * c + i] >> 4;
      }
#endif
  } else {  // Q6_K: bytes hold q + 32 (0..63)
    const BlockQ6_K& blk = reinterpret_cast<const BlockQ6_K*>(row)[g];
    G.nblk = 8;
    G.d = f16_to_f32(blk.d);
    for (int j = 0; j < 16; ++j) G.sc16[j] = blk.scales[j];
    for (int j = 0; j < 8; ++j)
      for (int i = 0; i < 16; ++i) G.scv[j][i] = blk.scales[2 * j + i / 8];
    for (int h = 0; h < 2; ++h) {
      const uint8_t* ql = blk.ql + 64 * h;
      const uint8_t* qh = blk.qh + 32 * h;
      uint8_t* u = G.u + 128 * h;
#if DFLASH_QX86
      const __m256i l0 = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(ql));
      const __m256i l1 = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(ql + 32));
      const __m256i hb = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(qh));
      const __m256i m4 = _mm256_set1_epi8(15), m30 = _mm256_set1_epi8(0x30);
      auto st = [&](int g4, __m256i lo4, __m256i hi2) {
        _mm256_store_si256(reinterpret_cast<__m256i*>(u + 32 * g4), _mm256_or_si256(lo4, _mm256_and_si256(hi2, m30)));
      };
      st(0, _mm256_and_si256(l0, m4), _mm256_slli_epi16(hb, 4));
      st(1, _mm256_and_si256(l1, m4), _mm256_slli_epi16(hb, 2));
      st(2, _mm256_and_si256(_mm256_srli_epi16(l0, 4), m4), hb);
      st(3, _mm256_and_si256(_mm256_srli_epi16(l1, 4), m4), _mm256_srli_epi16(hb, 2));
#else
      for (int g4 = 0; g4 < 4; ++g4)
        for (int l = 0; l < 32; ++l) {
          const int lo = (ql[l + 32 * (g4 & 1)] >> (4 * (g4 >> 1))) & 15;
          u[32 * g4 + l] = uint8_t(lo | (((qh[l] >> (2 * g4)) & 3) << 4));
        }
#endif
    }
  }
}

#if DFLASH_QX86
// Lane j = horizontal sum of v[j].
HWY_INLINE __m256i Reduce8(const __m256i* v) {
  const __m256i a01 = _mm256_hadd_epi32(v[0], v[1]), a23 = _mm256_hadd_epi32(v[2], v[3]);
  const __m256i a45 = _mm256_hadd_epi32(v[4], v[5]), a67 = _mm256_hadd_epi32(v[6], v[7]);
  const __m256i b0 = _mm256_hadd_epi32(a01, a23), b1 = _mm256_hadd_epi32(a45, a67);
  return _mm256_add_epi32(_mm256_permute2x128_si256(b0, b1, 0x20), _mm256_permute2x128_si256(b0, b1, 0x31));
}

// u8 x s8 dot products of 32 bytes, summed into 8 int32 lanes (pairs via madd with `mul`).
HWY_INLINE __m256i Dot32(__m256i u, __m256i s, __m256i mul16) {
  return _mm256_madd_epi16(_mm256_maddubs_epi16(u, s), mul16);
}

#if HWY_TARGET == HWY_AVX3_DL
constexpr bool kVnni = true;
#else
constexpr bool kVnni = false;
#endif

// The 8 integer block sums of one activation row against a decoded group.
template <WType T>
HWY_INLINE __m256i GroupIsum(const Group& G, const int8_t* x, const int32_t* xs, const int16_t* xs16) {
  const __m256i ones = _mm256_set1_epi16(1);
  __m256i v[8];
  for (int j = 0; j < 8; ++j) {
    const __m256i u = _mm256_load_si256(reinterpret_cast<const __m256i*>(G.u + 32 * j));
    const __m256i xv = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(x + 32 * j));
    if constexpr (T == WType::Q8_0) {
      const __m256i sx = _mm256_sign_epi8(xv, _mm256_load_si256(reinterpret_cast<const __m256i*>(G.w + 32 * j)));
      if constexpr (kVnni) v[j] = _mm256_dpbusd_epi32(_mm256_setzero_si256(), u, sx);
      else v[j] = Dot32(u, sx, ones);
    } else if constexpr (T == WType::Q6_K) {
      v[j] = Dot32(u, xv, _mm256_load_si256(reinterpret_cast<const __m256i*>(G.scv[j])));
    } else {
      if constexpr (kVnni) v[j] = _mm256_dpbusd_epi32(_mm256_setzero_si256(), u, xv);
      else v[j] = Dot32(u, xv, ones);
    }
  }
  __m256i s = Reduce8(v);
  if constexpr (T == WType::Q4_0) {
    s = _mm256_sub_epi32(s, _mm256_slli_epi32(_mm256_loadu_si256(reinterpret_cast<const __m256i*>(xs)), 3));
  } else if constexpr (T == WType::Q6_K) {
    const __m256i off = _mm256_madd_epi16(_mm256_load_si256(reinterpret_cast<const __m256i*>(G.sc16)),
                                          _mm256_loadu_si256(reinterpret_cast<const __m256i*>(xs16)));
    s = _mm256_sub_epi32(s, _mm256_slli_epi32(off, 5));
  }
  return s;
}

template <WType T>
HWY_INLINE void GroupAccumulate(const Group& G, const int8_t* x, const float* dx, const int32_t* xs,
                                const int16_t* xs16, float* acc) {
  const __m256i is = GroupIsum<T>(G, x, xs, xs16);
  const __m256 dxv = _mm256_loadu_ps(dx);
  __m256 t;
  if constexpr (T == WType::Q8_0 || T == WType::Q4_0) {  // one fma chain, in acc[0]
    alignas(32) int32_t isum[8];
    _mm256_store_si256(reinterpret_cast<__m256i*>(isum), is);
    for (int j = 0; j < G.nblk; ++j) acc[0] = block_fma(isum[j], G.ws[j], dx[j], acc[0]);
    return;
  } else if constexpr (T == WType::Q4_K) {
    const __m256i a = _mm256_mullo_epi32(is, _mm256_load_si256(reinterpret_cast<const __m256i*>(G.sc)));
    const __m256i c = _mm256_mullo_epi32(_mm256_loadu_si256(reinterpret_cast<const __m256i*>(xs)),
                                         _mm256_load_si256(reinterpret_cast<const __m256i*>(G.mn)));
    t = _mm256_sub_ps(_mm256_mul_ps(_mm256_cvtepi32_ps(a), _mm256_mul_ps(_mm256_set1_ps(G.d), dxv)),
                      _mm256_mul_ps(_mm256_cvtepi32_ps(c), _mm256_mul_ps(_mm256_set1_ps(G.dmin), dxv)));
  } else {
    t = _mm256_mul_ps(_mm256_cvtepi32_ps(is), _mm256_mul_ps(_mm256_set1_ps(G.d), dxv));
  }
  _mm256_store_ps(acc, _mm256_add_ps(_mm256_load_ps(acc), t));
}
#else
template <WType T>
HWY_INLINE void GroupAccumulate(const Group& G, const int8_t* x, const float* dx, const int32_t* xs,
                                const int16_t* xs16, float* acc) {
  for (int j = 0; j < 8; ++j) {
    const uint8_t* u = G.u + 32 * j;
    const int8_t* xj = x + 32 * j;
    float t;
    if constexpr (T == WType::Q8_0 || T == WType::Q4_0) {  // one fma chain, in acc[0]
      if (j >= G.nblk) return;
      int isum = 0;
      for (int i = 0; i < 32; ++i) isum += (T == WType::Q8_0 ? int(G.w[32 * j + i]) : int(u[i])) * int(xj[i]);
      if (T == WType::Q4_0) isum -= 8 * xs[j];
      acc[0] = block_fma(isum, G.ws[j], dx[j], acc[0]);
      continue;
    } else if constexpr (T == WType::Q4_K) {
      int isum = 0;
      for (int i = 0; i < 32; ++i) isum += int(u[i]) * int(xj[i]);
      t = float(G.sc[j] * isum) * (G.d * dx[j]) - float(G.mn[j] * xs[j]) * (G.dmin * dx[j]);
    } else {
      int isum = 0;
      for (int h = 0; h < 2; ++h) {
        int part = 0;
        for (int i = 0; i < 16; ++i) part += int(u[16 * h + i]) * int(xj[16 * h + i]);
        isum += int(G.sc16[2 * j + h]) * (part - 32 * int(xs16[2 * j + h]));
      }
      t = float(isum) * (G.d * dx[j]);
    }
    acc[j] = acc[j] + t;
  }
}
#endif

constexpr int kRowsPerPass = 32;


template <WType T>
void QRange(const QuantActs& a, int M, const WeightMatrix& w, float* y, int64_t n0, int64_t n1) {
  const int64_t N = w.rows, nb = w.cols / 32, ng = (nb + 7) / 8;
  Group G;
  alignas(32) float acc[kRowsPerPass][8];
  for (int m0 = 0; m0 < M; m0 += kRowsPerPass) {
    const int R = std::min(kRowsPerPass, M - m0);
    for (int64_t n = n0; n < n1; ++n) {
      const uint8_t* row = w.row(n);
      for (int r = 0; r < R; ++r)
        for (int j = 0; j < 8; ++j) acc[r][j] = 0.0f;
      for (int64_t g = 0; g < ng; ++g) {
        Decode<T>(row, g, nb, G);
        for (int r = 0; r < R; ++r)
          GroupAccumulate<T>(G, a.qrow(m0 + r) + g * 256, a.drow(m0 + r) + g * 8, a.srow(m0 + r) + g * 8,
                             a.s16row(m0 + r) + g * 16, acc[r]);
      }
      for (int r = 0; r < R; ++r) {
        const float* c = acc[r];
        y[int64_t(m0 + r) * N + n] = T == WType::Q8_0 || T == WType::Q4_0
                                         ? c[0]
                                         : ((c[0] + c[1]) + (c[2] + c[3])) + ((c[4] + c[5]) + (c[6] + c[7]));
      }
    }
  }
}

void QRangeDispatch(const QuantActs& a, int M, const WeightMatrix& w, float* y, int64_t n0, int64_t n1) {
  switch (w.type) {
    case WType::Q8_0: return QRange<WType::Q8_0>(a, M, w, y, n0, n1);
    case WType::Q4_0: return QRange<WType::Q4_0>(a, M, w, y, n0, n1);
    case WType::Q4_K: return QRange<WType::Q4_K>(a, M, w, y, n0, n1);
    case WType::Q6_K: return QRange<WType::Q6_K>(a, M, w, y, n0, n1);
    default: return;
  }
}

const char* QTargetName() { return hwy::TargetName(HWY_TARGET); }

}  // namespace HWY_NAMESPACE
}  // namespace dflash
#if HWY_TARGET == HWY_AVX3_DL
#pragma GCC pop_options
#endif
HWY_AFTER_NAMESPACE();

#if HWY_ONCE
namespace dflash {
HWY_EXPORT(QuantizeActs);
HWY_EXPORT(QRangeDispatch);
HWY_EXPORT(QTargetName);

void quantize_acts(const float* x, int M, int64_t K, QuantActs& out) {
  out.resize(M, K);
  HWY_DYNAMIC_DISPATCH(QuantizeActs)(x, 0, M, K, out);
}
void qmatmul_range(const QuantActs& a, int M, const WeightMatrix& w, float* y, int64_t n0, int64_t n1) {
  HWY_DYNAMIC_DISPATCH(QRangeDispatch)(a, M, w, y, n0, n1);
}
const char* qmatmul_target_name() {
  const char* hwy_name = HWY_DYNAMIC_DISPATCH(QTargetName)();
  // Packed Q8_0/Q4_0 take SDOT (ARM), or AMX from kAmxMinRows rows on (x86); the rest the
  // Highway target.
  const char* prefix = neon_dotprod_available() ? "SDOT+" : amx_int8_available() ? "AMX+" : nullptr;
  if (!prefix) return hwy_name;
  thread_local std::string name;
  name = std::string(prefix) + hwy_name;
  return name.c_str();
}

namespace {
// A piece of one product: output units [u0, u1) of matrix `i` (16-row groups when packed,
// rows otherwise).
struct QTask {
  int i;
  int64_t u0, u1;
};

// Splits one matrix into tasks, at least 4 per thread so that a slow thread does not hold the
// others up: row-layout matrices, and packed ones that more than kPackedOnePassRows rows come
// back to (chunks whose weights stay in L2 for them). Threaded single passes over packed
// weights go through ThreadPool::parallel_ranges instead (qmatmul_multi).
void split(const WeightMatrix& w, int i, int threads, int M, std::vector<QTask>& out) {
  if (w.packed) {
    // Whole sets of 4 groups, so the decode tile reads one sequential stream.
    const PackedGeometry pg = packed_geometry(w.type, w.rows, w.cols);
    const int64_t sets = pg.groups / kPackGroupSet;
    int64_t chunk = std::max<int64_t>(1, (sets + threads * 4 - 1) / (threads * 4));
    if (M > kPackedOnePassRows)
      chunk = std::min(chunk, std::max<int64_t>(1, (256 * 1024) / std::max<int64_t>(pg.set_bytes, 1)));
    const int64_t gchunk = chunk * kPackGroupSet;
    for (int64_t g = 0; g < pg.groups; g += gchunk) out.push_back({i, g, std::min(pg.groups, g + gchunk)});
    return;
  }
  // Row chunks in multiples of 16 rows, so two threads never write the same 64-byte line of y.
  const int64_t rb = int64_t(row_bytes(w.type, w.cols));
  int64_t chunk = std::max<int64_t>(16, (128 * 1024) / std::max<int64_t>(rb, 1));
  chunk = std::min(chunk, std::max<int64_t>(16, (w.rows + threads * 4 - 1) / (threads * 4)));
  chunk = (chunk + 15) / 16 * 16;
  for (int64_t n = 0; n < w.rows; n += chunk) out.push_back({i, n, std::min(w.rows, n + chunk)});
}
}  // namespace

void qmatmul_multi(const float* x, int M, const MatmulOut* outs, int n_outs, ThreadPool* pool) {
  if (n_outs <= 0 || M <= 0) return;
  // Reused across calls: a forward makes hundreds of these and the sizes repeat.
  thread_local QuantActs tl_acts;
  thread_local std::vector<QTask> tl_tasks;
  QuantActs& acts = tl_acts;  // names the worker threads' lambdas see as this thread's buffers
  std::vector<QTask>& tasks = tl_tasks;
  const int64_t K = outs[0].w->cols;
  int64_t work = 0;
  for (int i = 0; i < n_outs; ++i) {
    if (outs[i].w->cols != K) throw std::invalid_argument("matmul_multi: matrices of different widths");
    work += int64_t(M) * outs[i].w->rows * K;
  }
  if (acts.rows != M || acts.K != K) acts.resize(M, K);
  const int threads = pool ? pool->size() : 1;
  const bool small = work < (int64_t(1) << 18);  // waking workers costs more than it saves
  const bool par = pool && !small && threads > 1;
  if (par && M >= 2 * threads) {
    pool->parallel_for(threads, [&](int t) {
      HWY_DYNAMIC_DISPATCH(QuantizeActs)(x, M * t / threads, M * (t + 1) / threads, K, acts);
    });
  } else {
    HWY_DYNAMIC_DISPATCH(QuantizeActs)(x, 0, M, K, acts);
  }
  bool all_packed = true;
  for (int i = 0; i < n_outs; ++i) all_packed = all_packed && outs[i].w->packed;
  if (par && all_packed && M <= kPackedOnePassRows) {
    // One pass over the weights: the sets of every matrix in a row as units, each thread its
    // share in one stream and then pieces of the others' (ThreadPool::parallel_ranges). Each
    // set's outputs are computed the same way whichever thread takes it.
    thread_local std::vector<int64_t> tl_first, tl_groups;  // first unit of each matrix (then
    std::vector<int64_t>& first = tl_first;                  // the total), and its groups
    std::vector<int64_t>& groups = tl_groups;
    first.assign(size_t(n_outs) + 1, 0);
    groups.resize(size_t(n_outs));
    for (int i = 0; i < n_outs; ++i) {
      groups[size_t(i)] = packed_geometry(outs[i].w->type, outs[i].w->rows, outs[i].w->cols).groups;
      first[size_t(i) + 1] = first[size_t(i)] + (groups[size_t(i)] + kPackGroupSet - 1) / kPackGroupSet;
    }
    pool->parallel_ranges(first.back(), 1, [&](int64_t u0, int64_t u1) {
      for (int i = 0; i < n_outs && u0 < u1; ++i) {
        const int64_t end = first[size_t(i) + 1];
        if (u0 >= end) continue;
        const int64_t e = std::min(u1, end);
        qmatmul_packed_range(acts, M, *outs[i].w, outs[i].y, (u0 - first[size_t(i)]) * kPackGroupSet,
                             std::min(groups[size_t(i)], (e - first[size_t(i)]) * kPackGroupSet));
        u0 = e;
      }
    });
    return;
  }
  tasks.clear();
  for (int i = 0; i < n_outs; ++i) split(*outs[i].w, i, threads, M, tasks);
  auto fn = [&](int t) {
    const QTask& k = tasks[size_t(t)];
    const MatmulOut& o = outs[k.i];
    if (o.w->packed) qmatmul_packed_range(acts, M, *o.w, o.y, k.u0, k.u1);
    else HWY_DYNAMIC_DISPATCH(QRangeDispatch)(acts, M, *o.w, o.y, k.u0, k.u1);
  };
  if (par) pool->parallel_for(int(tasks.size()), fn);
  else for (size_t t = 0; t < tasks.size(); ++t) fn(int(t));
}

void qmatmul(const float* x, int M, const WeightMatrix& w, float* y, ThreadPool* pool) {
  const MatmulOut o{&w, y};
  qmatmul_multi(x, M, &o, 1, pool);
}
}  // namespace dflash
#endif
