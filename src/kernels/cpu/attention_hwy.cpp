// Fast tiled attention over f32, f16, Q8_0 and Q4_0 KV caches, SIMD through Highway.
//
// Scores against Q8_0/Q4_0 keys are integer dot products with the quantized query (the
// definition in kernels.h). With VNNI a tile's keys are transposed 16 at a time into columns
// of 4 bytes, so one dpbusd against a broadcast 4 bytes of the query gives 16 keys' partial
// sums with no horizontal reduction, 64 multiply-adds per instruction where the fp32 path does
// 16 after converting every key to fp32; the transpose is shared by every query row of the
// block. Other targets compute the same exact integers with fp32 arithmetic on the codes
// (exact: a block's partial sums stay below 2^24).
//
// A task takes a block of query positions and every query head that shares one kv head, and
// walks the keys in tiles: each tile is read from memory once per block instead of once per
// query row, then used by all the block's rows from L1 (f16 and quantized values converted to
// fp32 in registers as each group of rows reads them).
//
// Batch invariance: tiles (kTile keys) and chunks (kChunk keys) sit at fixed absolute
// positions. A row's softmax state over one chunk is built tile by tile in position order
// with an online-softmax update; chunk states are merged in chunk order. Each step depends on
// the row's own query and key range only: the other rows of the block, whether chunks of a
// row are computed by one task or by several (split across threads for short batches), and
// the thread count cannot change a bit of the result.
#define HWY_WANT_AVX3_DL  // VNNI
#undef HWY_TARGET_INCLUDE
#define HWY_TARGET_INCLUDE "kernels/cpu/attention_hwy.cpp"
#include <hwy/foreach_target.h>  // IWYU pragma: keep
#include <hwy/highway.h>
#include <hwy/cache_control.h>
#include <hwy/contrib/math/math-inl.h>

#include <algorithm>
#include <climits>
#include <cmath>
#include <cstddef>
#include <cstring>
#include <type_traits>
#include <vector>

#include "kernels/cpu/quant_act.h"
#include "kernels/kernels.h"
#include "kernels/numeric.h"

#undef DFLASH_AX86
#undef DFLASH_AVNNI
#if HWY_TARGET == HWY_AVX2 || HWY_TARGET == HWY_AVX3 || HWY_TARGET == HWY_AVX3_DL
#include <immintrin.h>
#define DFLASH_AX86 1
#else
#define DFLASH_AX86 0
#endif
#define DFLASH_AVNNI (HWY_TARGET == HWY_AVX3_DL)

#ifndef DFLASH_ATTENTION_SHARED
#define DFLASH_ATTENTION_SHARED
namespace dflash::attn {
// Keys per chunk: the unit of work a short batch is split into across threads.
constexpr int kChunk = 256;
// Keys per tile: a tile of keys and values stays in L1 (up to 16 KiB each, at f32).
inline int tile_keys(int hd) { return hd <= 64 ? 64 : hd <= 128 ? 32 : 16; }
// Query positions per block: about 64 query rows (positions x heads of one kv head).
inline int block_positions(int group) { return std::max(1, 64 / std::max(group, 1)); }
// Longest Q8_0/Q4_0 key row the VNNI scores take (the zero row that pads 16 keys is this long).
constexpr size_t kVnniMaxRowBytes = 4096;

// A row's softmax state: running max m, sum l of exp(s - m), and acc = sum exp(s - m) v.
// Merging b into a is the same function wherever it runs, so a row gets the same bits
// whether its chunks were merged inside one task or after a split.
inline void merge_state(float& m, float& l, float* acc, float mb, float lb, const float* accb, int hd) {
  if (mb == -INFINITY) return;  // b saw no keys
  if (m == -INFINITY) {
    m = mb;
    l = lb;
    std::memcpy(acc, accb, sizeof(float) * size_t(hd));
    return;
  }
  const float mn = std::max(m, mb);
  const float sa = std::exp(m - mn), sb = std::exp(mb - mn);
  l = l * sa + lb * sb;
  for (int d = 0; d < hd; ++d) acc[d] = acc[d] * sa + accb[d] * sb;
  m = mn;
}
}  // namespace dflash::attn
#endif

HWY_BEFORE_NAMESPACE();
#if DFLASH_AVNNI
// Highway's AVX3_DL target string names avxvnni (VEX); the EVEX form is what AVX3_DL CPUs have.
#pragma GCC push_options
#pragma GCC target("avx512vnni")
#endif
namespace dflash {
namespace HWY_NAMESPACE {
namespace hn = hwy::HWY_NAMESPACE;
// Capped at 16 lanes so a Q4_0 half-block (16 nibbles) always fills whole vectors.
using DF = hn::CappedTag<float, 16>;
using attn::kChunk;

#include "kernels/cpu/attention_cache_reads-inl.h"

#if HWY_TARGET != HWY_SCALAR
// Adds the 128-bit blocks of v: (B0 + B2) + (B1 + B3) on 512-bit vectors, B0 + B1 on 256.
template <class D>
HWY_INLINE hn::Vec<hn::Full128<float>> FoldBlocks(D d, hn::Vec<D> v) {
  if constexpr (hn::MaxLanes(D()) > 4) {
    const hn::Half<D> dh;
    return FoldBlocks(dh, hn::Add(hn::LowerHalf(dh, v), hn::UpperHalf(dh, v)));
  } else {
    return v;
  }
}

// Lane sums of a0..a3 as lanes 0..3 of one 128-bit vector. Each sum takes the same tree of
// additions, ((x0 + x2) + (x1 + x3)) within each block and then across blocks, whichever
// slot its vector is in: a key's score does not depend on the keys computed beside it.
HWY_INLINE hn::Vec<hn::Full128<float>> Sum4(hn::Vec<DF> a0, hn::Vec<DF> a1, hn::Vec<DF> a2, hn::Vec<DF> a3) {
  const DF df;
  const hn::Repartition<uint64_t, DF> du;
  const auto t0 = hn::BitCast(du, hn::Add(hn::InterleaveLower(df, a0, a1), hn::InterleaveUpper(df, a0, a1)));
  const auto t1 = hn::BitCast(du, hn::Add(hn::InterleaveLower(df, a2, a3), hn::InterleaveUpper(df, a2, a3)));
  const auto s =
      hn::Add(hn::BitCast(df, hn::InterleaveLower(du, t0, t1)), hn::BitCast(df, hn::InterleaveUpper(du, t0, t1)));
  return FoldBlocks(df, s);
}

// Scores of NR query rows against the four keys kr[0..3] (the first nk real, the rest zero
// vectors): every dot is one accumulator over head_dim in lane order, then Sum4, the same
// operations for a given (row, key) whichever rows or keys it is computed beside.
template <int NR, bool kFull, class KT>
HWY_INLINE void ScoreQuad(const float* const* q, const KT* const* kr, int nk, int hd,
                          hn::Vec<hn::Full128<float>> vscale, float* s, int ls) {
  const DF df;
  const hn::Full128<float> d4;
  const int L = int(hn::Lanes(df));
  hn::Vec<DF> acc[NR][4];
#pragma GCC unroll 16
  for (int u = 0; u < NR; ++u)
#pragma GCC unroll 4
    for (int x = 0; x < 4; ++x) acc[u][x] = hn::Zero(df);
  for (int c = 0; c < hd; c += L) {
    hn::Vec<DF> kv[4];
#pragma GCC unroll 4
    for (int x = 0; x < 4; ++x) kv[x] = kFull || x < nk ? LoadF32(df, kr[x] + c) : hn::Zero(df);
#pragma GCC unroll 16
    for (int u = 0; u < NR; ++u) {
      const auto qv = hn::LoadU(df, q[u] + c);
#pragma GCC unroll 4
      for (int x = 0; x < 4; ++x) acc[u][x] = hn::MulAdd(qv, kv[x], acc[u][x]);
    }
  }
#pragma GCC unroll 16
  for (int u = 0; u < NR; ++u) {
    const auto sv = hn::Mul(Sum4(acc[u][0], acc[u][1], acc[u][2], acc[u][3]), vscale);
    if (kFull) {
      hn::StoreU(sv, d4, s + u * ls);
    } else {
      float tmp[4];
      hn::StoreU(sv, d4, tmp);
      for (int x = 0; x < nk; ++x) s[u * ls + x] = tmp[x];
    }
  }
}

// s[u][j - ts] = dot(q[u], K[j - ts]) * scale for keys j in [jb, je), NR query rows, four keys
// at a time (ScoreQuad). Missing keys of a last partial group are zero vectors (no read past
// the key range).
template <int NR, class KT>
HWY_INLINE void Scores(const float* const* q, const KT* K, int hd, int ts, int jb, int je, float scale, float* s,
                       int ls, PrefetchCursor& pf) {
  const hn::Full128<float> d4;
  const auto vscale = hn::Set(d4, scale);
  for (int j = jb; j < je; j += 4) {
    const int nk = std::min(4, je - j);
    const KT* kr[4];
#pragma GCC unroll 4
    for (int x = 0; x < 4; ++x) kr[x] = K + size_t(j + std::min(x, nk - 1) - ts) * hd;
    pf.Step();
    if (nk == 4) ScoreQuad<NR, true>(q, kr, 4, hd, vscale, s + j - ts, ls);
    else ScoreQuad<NR, false>(q, kr, nk, hd, vscale, s + j - ts, ls);
  }
}
#else
template <int NR, class KT>
HWY_INLINE void Scores(const float* const* q, const KT* K, int hd, int ts, int jb, int je, float scale, float* s,
                       int ls, PrefetchCursor& pf) {
  for (int j = jb; j < je; ++j)
    for (int u = 0; u < NR; ++u) {
      float a = 0;
      for (int c = 0; c < hd; ++c) a += q[u][c] * ScalarF32(K[size_t(j - ts) * hd + c]);
      s[u * ls + j - ts] = a * scale;
    }
}
#endif

// acc[u][c0 ..) += sum_j p[u][j - ts] * V[j - ts][c0 ..) over keys [jb, je) in order, for NR
// rows and NV vectors of head_dim: the accumulators stay in registers.
template <int NR, int NV, class VT>
HWY_INLINE void AccumulateSlab(float* const* acc, const float* p, int ls, const VT* V, int hd, int ts, int jb,
                               int je, int c0) {
  const DF df;
  const int L = int(hn::Lanes(df));
  hn::Vec<DF> a[NR][NV];
#pragma GCC unroll 16
  for (int u = 0; u < NR; ++u)
#pragma GCC unroll 4
    for (int x = 0; x < NV; ++x) a[u][x] = hn::LoadU(df, acc[u] + c0 + x * L);
  for (int j = jb; j < je; ++j) {
    hn::Vec<DF> vv[NV];
#pragma GCC unroll 4
    for (int x = 0; x < NV; ++x) vv[x] = ValueVec(df, V, size_t(j - ts), hd, c0 + x * L);
#pragma GCC unroll 16
    for (int u = 0; u < NR; ++u) {
      const auto pw = hn::Set(df, p[u * ls + j - ts]);
#pragma GCC unroll 4
      for (int x = 0; x < NV; ++x) a[u][x] = hn::MulAdd(pw, vv[x], a[u][x]);
    }
  }
#pragma GCC unroll 16
  for (int u = 0; u < NR; ++u)
#pragma GCC unroll 4
    for (int x = 0; x < NV; ++x) hn::StoreU(a[u][x], df, acc[u] + c0 + x * L);
}

// acc[u] += sum_j p[u][j - ts] * V[j - ts] over keys [jb, je) in order, for NR rows; head_dim
// in slabs of up to four vectors.
template <int NR, class VT>
HWY_INLINE void AccumulateValues(float* const* acc, const float* p, int ls, const VT* V, int hd, int ts, int jb,
                                 int je) {
  const int L = int(hn::Lanes(DF()));
  for (int c0 = 0; c0 < hd; c0 += 4 * L) {
    switch (std::min(4, (hd - c0) / L)) {
      case 4: AccumulateSlab<NR, 4>(acc, p, ls, V, hd, ts, jb, je, c0); break;
      case 3: AccumulateSlab<NR, 3>(acc, p, ls, V, hd, ts, jb, je, c0); break;
      case 2: AccumulateSlab<NR, 2>(acc, p, ls, V, hd, ts, jb, je, c0); break;
      default: AccumulateSlab<NR, 1>(acc, p, ls, V, hd, ts, jb, je, c0); break;
    }
  }
}

// Online-softmax update of NR rows' chunk states with one tile of keys [jb, je) (all NR rows
// share the key range: they are the heads of one query position).
// kScored: s already holds the rows' scores (-inf outside [jb, je)), q and K are not read.
template <int NR, bool kScored, class KT, class VT>
HWY_INLINE void TileRows(const float* const* q, float* const* acc, float* m, float* l, const KT* K, const VT* V, int hd,
                         int T, int ts, int jb, int je, float scale, float* s, PrefetchCursor& pf) {
  const DF df;
  const int L = int(hn::Lanes(df));
  const auto ninf = hn::Set(df, -INFINITY);
  if constexpr (!kScored) {
    for (int u = 0; u < NR; ++u)
      for (int x = 0; x < T; x += L) hn::StoreU(ninf, df, s + u * T + x);
    Scores<NR>(q, K, hd, ts, jb, je, scale, s, T, pf);
  }
  for (int u = 0; u < NR; ++u) {
    float* su = s + u * T;
    auto mx = ninf;
    for (int x = 0; x < T; x += L) mx = hn::Max(mx, hn::LoadU(df, su + x));
    const float mt = hn::GetLane(hn::MaxOfLanes(df, mx));
    const float mn = std::max(m[u], mt);
    // Keys outside [jb, je) hold -inf and get weight exactly 0.
    const auto vmn = hn::Set(df, mn);
    auto sum = hn::Zero(df);
    for (int x = 0; x < T; x += L) {
      const auto pv = hn::Exp(df, hn::Sub(hn::LoadU(df, su + x), vmn));
      hn::StoreU(pv, df, su + x);
      sum = hn::Add(sum, pv);
    }
    const float lt = hn::GetLane(hn::SumOfLanes(df, sum));
    if (m[u] == -INFINITY) {
      l[u] = lt;
    } else {
      const float alpha = std::exp(m[u] - mn);
      l[u] = l[u] * alpha + lt;
      const auto va = hn::Set(df, alpha);
      for (int d = 0; d < hd; d += L) hn::StoreU(hn::Mul(hn::LoadU(df, acc[u] + d), va), df, acc[u] + d);
    }
    m[u] = mn;
  }
  AccumulateValues<NR>(acc, s, T, V, hd, ts, jb, je);
}

// Asks for the cache rows [lo, hi) of keys and values at once: a task's first tile. A decode
// step reads each layer's cache once, from memory, in short runs (a task per kv head) that the
// hardware prefetcher alone does not get ahead of.
HWY_INLINE void PrefetchRows(const uint8_t* K, const uint8_t* V, size_t rb, int lo, int hi) {
  if (lo >= hi) return;
  for (size_t o = (size_t(lo) * rb) & ~size_t(63); o < size_t(hi) * rb; o += 64) {
    hwy::Prefetch(K + o);
    hwy::Prefetch(V + o);
  }
}

struct Scratch {
  // kf: a tile's Q8_0/Q4_0 key codes as fp32 (portable path); vf: its Q4_0 values as fp32.
  std::vector<float> kf, vf, s, m, l, acc, cm, cl, cacc;
  // Q8_0/Q4_0 keys: the task's query rows gathered, quantized, and (portable path) their codes
  // as fp32; the tile's key scales by block ([b][key], 16 keys of zero padding); its scores.
  std::vector<float> qx, qf, dkT, sall;
  QuantActs qa;
};

#include "kernels/cpu/attention_int_scores-inl.h"

// The task's query rows quantized (and, for the portable path, as fp32 codes).
template <WType T>
void QuantizeQueries(const AttentionArgs& a, int g, int i0, int i1, Scratch& w) {
  const int hd = a.head_dim, group = a.n_heads / a.n_kv_heads, R = (i1 - i0) * group;
  w.qx.resize(size_t(R) * size_t(hd));
  for (int i = i0; i < i1; ++i)
    std::memcpy(w.qx.data() + size_t(i - i0) * size_t(group) * size_t(hd),
                a.q + (int64_t(i) * a.n_heads + int64_t(g) * group) * hd, sizeof(float) * size_t(group) * size_t(hd));
  quantize_acts(w.qx.data(), R, hd, w.qa);
  if (DFLASH_AVNNI && row_bytes(T, hd) <= attn::kVnniMaxRowBytes) return;
  w.qf.resize(size_t(R) * size_t(hd));
  for (int r = 0; r < R; ++r)
    for (int c = 0; c < hd; ++c) w.qf[size_t(r) * size_t(hd) + size_t(c)] = float(w.qa.qrow(r)[c]);
}

// The cursor over keys [plo, phi), the tile after ts (it may lie in the task's next chunk):
// its lines shared out over the quads of scores that tile ts computes, every row group's walk
// over its (at most `keys`) keys.
HWY_INLINE PrefetchCursor NextTileCursor(const AttentionArgs& a, const uint8_t* Kb, const uint8_t* Vb, size_t rb,
                                         int i0, int i1, int ts, int plo, int phi, int keys) {
  PrefetchCursor pf;
  if (plo >= phi) return pf;
  pf.k = Kb;
  pf.v = Vb;
  pf.at = (size_t(plo) * rb) & ~size_t(63);
  pf.end = size_t(phi) * rb;
  const int group = a.n_heads / a.n_kv_heads, te = ts + attn::tile_keys(a.head_dim);
  int row_groups = 0;
  for (int i = i0; i < i1; ++i)
    if (std::max(ts, a.kbeg[i]) < std::min(te, a.kend[i])) row_groups += (group + 3) / 4;
  const size_t steps = size_t(std::max(1, row_groups)) * size_t((keys + 3) / 4);
  pf.per_step = ((pf.end - pf.at + 63) / 64 + steps - 1) / steps;
  return pf;
}

// Softmax states of the rows of positions [i0, i1) x the heads of kv head g over chunk c:
// cm/cl/cacc[r], r = (i - i0) * group + head within the group. Returns false if no row of the
// block has a key in the chunk. `cold`: no earlier chunk of this task asked for this one's
// first tile. Keys below task_hi are read by this task, in this chunk or a later one.
template <WType T>
bool ChunkStates(const AttentionArgs& a, int g, int i0, int i1, int c, bool cold, int task_hi, Scratch& w) {
  const int hd = a.head_dim, group = a.n_heads / a.n_kv_heads, Tk = attn::tile_keys(hd);
  const int R = (i1 - i0) * group;
  const size_t rb = row_bytes(a.kv_type, hd);
  const uint8_t* Kb = static_cast<const uint8_t*>(a.k_cache) + size_t(g) * size_t(a.capacity) * rb;
  const uint8_t* Vb = static_cast<const uint8_t*>(a.v_cache) + size_t(g) * size_t(a.capacity) * rb;
  const int cs = c * kChunk, ce = cs + kChunk;
  int ulo = ce, uhi = cs;  // union of the block's key ranges within the chunk
  for (int i = i0; i < i1; ++i) {
    const int jb = std::max(cs, a.kbeg[i]), je = std::min(ce, a.kend[i]);
    if (jb < je) ulo = std::min(ulo, jb), uhi = std::max(uhi, je);
  }
  if (ulo >= uhi) return false;
  w.cm.assign(size_t(R), -INFINITY);
  w.cl.assign(size_t(R), 0.0f);
  w.cacc.assign(size_t(R) * hd, 0.0f);
  constexpr bool kIntKeys = T == WType::Q8_0 || T == WType::Q4_0;
  // Values are converted to fp32 in registers as each group of 4 rows reads them, except Q4_0's
  // (two more operations per vector than Q8_0's) for blocks of more than two groups: a decode
  // step reads them in registers, a verify or prefill block decodes each tile once into L1.
  int row_groups = 0;
  for (int i = i0; i < i1; ++i) row_groups += (group + 3) / 4;
  const bool decode_values = T == WType::Q4_0 && row_groups > 2;
  if (kIntKeys) w.kf.resize(size_t(Tk) * hd);
  if (decode_values) w.vf.resize(size_t(Tk) * hd);
  if (kIntKeys) {
    w.dkT.resize(size_t(hd / kQBlock) * size_t(Tk + 16));
    w.sall.resize(size_t(R) * size_t(Tk));
  }
  w.s.resize(size_t(4) * Tk);
  // A task starts cold, on rows no earlier tile asked for; after that, each tile's cursor
  // runs on into the next chunk.
  if (cold) PrefetchRows(Kb, Vb, rb, ulo, std::min(uhi, cs + Tk));
  for (int ts = cs; ts < ce; ts += Tk) {
    const int te = ts + Tk;
    const int lo = std::max(ts, ulo), hi = std::min(te, uhi);
    if (lo >= hi) continue;
    PrefetchCursor pf = NextTileCursor(a, Kb, Vb, rb, i0, i1, ts, std::max(te, ulo),
                                       std::min(te + Tk, std::max(uhi, task_hi)), hi - lo);
    // The online-softmax update of every row group with keys K and values V of the tile.
    auto update_rows = [&](const auto* K, const auto* V) {
      for (int i = i0; i < i1; ++i) {
        const int jb = std::max(ts, a.kbeg[i]), je = std::min(te, a.kend[i]);
        if (jb >= je) continue;
        for (int h0 = 0; h0 < group; h0 += 4) {
          const int nr = std::min(4, group - h0);
          const float* q[4];
          float* acc[4];
          const int r0 = (i - i0) * group + h0;
          for (int u = 0; u < nr; ++u) {
            q[u] = a.q + (int64_t(i) * a.n_heads + int64_t(g) * group + h0 + u) * hd;
            acc[u] = w.cacc.data() + size_t(r0 + u) * hd;
          }
          float* m = w.cm.data() + r0;
          float* l = w.cl.data() + r0;
          float* s = kIntKeys ? w.sall.data() + size_t(r0) * size_t(Tk) : w.s.data();
          switch (nr) {
            case 1: TileRows<1, kIntKeys>(q, acc, m, l, K, V, hd, Tk, ts, jb, je, a.scale, s, pf); break;
            case 2: TileRows<2, kIntKeys>(q, acc, m, l, K, V, hd, Tk, ts, jb, je, a.scale, s, pf); break;
            case 3: TileRows<3, kIntKeys>(q, acc, m, l, K, V, hd, Tk, ts, jb, je, a.scale, s, pf); break;
            default: TileRows<4, kIntKeys>(q, acc, m, l, K, V, hd, Tk, ts, jb, je, a.scale, s, pf); break;
          }
        }
      }
    };
    if constexpr (T == WType::F32) {
      update_rows(reinterpret_cast<const float*>(Kb) + size_t(ts) * hd,
                  reinterpret_cast<const float*>(Vb) + size_t(ts) * hd);
    } else if constexpr (kIntKeys) {
      IntScores<T>(a, Kb, rb, i0, i1, ts, lo, hi, Tk, w, pf);
      const QuantRows<T> vq{Vb + size_t(ts) * rb, rb};
      if (decode_values) {
        DecodeTile(hd, ts, lo, hi, w.vf.data(),
                   [&](DF df, int j, int c) { return ValueVec(df, &vq, size_t(j - ts), hd, c); });
        update_rows(static_cast<const float*>(nullptr), w.vf.data());
      } else {
        update_rows(static_cast<const float*>(nullptr), &vq);
      }
    } else {
      update_rows(reinterpret_cast<const hwy::float16_t*>(Kb) + size_t(ts) * hd,
                  reinterpret_cast<const hwy::float16_t*>(Vb) + size_t(ts) * hd);
    }
    pf.Finish();
  }
  return true;
}

// One task: kv head g, positions [i0, i1), chunks [c0, c1). With `part` null the task covers
// every chunk of its rows and writes the normalized output; otherwise it stores each chunk's
// states at part[((i * n_heads + h) * n_chunks + c - c_base) * (hd + 2)] = {m, l, acc...}.
template <WType T>
void BlockTask(const AttentionArgs& a, int g, int i0, int i1, int c0, int c1, float* part, int c_base,
               int n_chunks) {
  thread_local Scratch w;
  const int hd = a.head_dim, group = a.n_heads / a.n_kv_heads, R = (i1 - i0) * group;
  const size_t stride = size_t(hd) + 2;
  if (!part) {
    w.m.assign(size_t(R), -INFINITY);
    w.l.assign(size_t(R), 0.0f);
    w.acc.assign(size_t(R) * hd, 0.0f);
  }
  if constexpr (T == WType::Q8_0 || T == WType::Q4_0) QuantizeQueries<T>(a, g, i0, i1, w);
  int task_hi = 0;
  for (int i = i0; i < i1; ++i) task_hi = std::max(task_hi, std::min(a.kend[i], c1 * kChunk));
  bool warm = false;
  for (int c = c0; c < c1; ++c) {
    const bool any = ChunkStates<T>(a, g, i0, i1, c, !warm, task_hi, w);
    warm = warm || any;
    for (int r = 0; r < R; ++r) {
      const float cm = any ? w.cm[size_t(r)] : -INFINITY;
      if (part) {
        const int i = i0 + r / group, h = g * group + r % group;
        float* p = part + (size_t(i * a.n_heads + h) * size_t(n_chunks) + size_t(c - c_base)) * stride;
        p[0] = cm;
        if (cm != -INFINITY) {
          p[1] = w.cl[size_t(r)];
          std::memcpy(p + 2, w.cacc.data() + size_t(r) * hd, sizeof(float) * size_t(hd));
        }
      } else if (cm != -INFINITY) {
        attn::merge_state(w.m[size_t(r)], w.l[size_t(r)], w.acc.data() + size_t(r) * hd, cm, w.cl[size_t(r)],
                          w.cacc.data() + size_t(r) * hd, hd);
      }
    }
  }
  if (part) return;
  for (int r = 0; r < R; ++r) {
    const int i = i0 + r / group, h = g * group + r % group;
    float* o = a.out + (int64_t(i) * a.n_heads + h) * hd;
    const float inv = a.kbeg[i] < a.kend[i] ? 1.0f / w.l[size_t(r)] : 0.0f;
    const float* acc = w.acc.data() + size_t(r) * hd;
    for (int d = 0; d < hd; ++d) o[d] = a.kbeg[i] < a.kend[i] ? acc[d] * inv : 0.0f;
  }
}

void BlockTaskDispatch(const AttentionArgs& a, int g, int i0, int i1, int c0, int c1, float* part, int c_base,
                       int n_chunks) {
  switch (a.kv_type) {
    case WType::Q8_0: return BlockTask<WType::Q8_0>(a, g, i0, i1, c0, c1, part, c_base, n_chunks);
    case WType::Q4_0: return BlockTask<WType::Q4_0>(a, g, i0, i1, c0, c1, part, c_base, n_chunks);
    case WType::F16: return BlockTask<WType::F16>(a, g, i0, i1, c0, c1, part, c_base, n_chunks);
    default: return BlockTask<WType::F32>(a, g, i0, i1, c0, c1, part, c_base, n_chunks);
  }
}

}  // namespace HWY_NAMESPACE
}  // namespace dflash
#if DFLASH_AVNNI
#pragma GCC pop_options
#endif
HWY_AFTER_NAMESPACE();

#if HWY_ONCE
namespace dflash {
HWY_EXPORT(BlockTaskDispatch);

void attention(const AttentionArgs& a, ThreadPool* pool) {
  if (a.n_q <= 0) return;
  const int group = a.n_heads / a.n_kv_heads, hd = a.head_dim;
  // The SIMD path needs whole vectors along head_dim (every shipped shape has a multiple of
  // 16); others take the reference, which is batch invariant too (one row at a time).
  if (hd % 16 != 0 || ((a.kv_type == WType::Q8_0 || a.kv_type == WType::Q4_0) && hd % kQBlock != 0))
    return ref::attention(a);
  const int P = std::min(a.n_q, attn::block_positions(group));
  const int n_blocks = (a.n_q + P - 1) / P;
  int kmin = INT_MAX, kmax = 0;
  int64_t work = 0;  // multiply-adds, to keep tiny attention calls on the calling thread
  for (int i = 0; i < a.n_q; ++i) {
    if (a.kbeg[i] < a.kend[i]) kmin = std::min(kmin, a.kbeg[i]), kmax = std::max(kmax, a.kend[i]);
    work += int64_t(std::max(0, a.kend[i] - a.kbeg[i])) * a.n_heads * hd;
  }
  const int c_lo = kmax > kmin ? kmin / attn::kChunk : 0;
  const int c_hi = kmax > kmin ? (kmax + attn::kChunk - 1) / attn::kChunk : c_lo + 1;
  const int threads = pool ? pool->size() : 1;
  const bool parallel = pool && threads > 1 && work >= (int64_t(1) << 17);
  const int tasks_unsplit = a.n_kv_heads * n_blocks;
  // Few blocks (decode, short verify) that do not share out evenly: split the keys by chunk so
  // every thread has work. When they do share out evenly (2 kv heads on 2 threads), each task
  // keeps its whole key range: no partial states to store and merge on the calling thread.
  const bool split = parallel && tasks_unsplit < 2 * threads && tasks_unsplit % threads != 0 && c_hi - c_lo > 1;
  if (!split) {
    auto fn = [&](int t) {
      const int g = t % a.n_kv_heads, b = t / a.n_kv_heads;
      const int i0 = b * P, i1 = std::min(a.n_q, i0 + P);
      HWY_DYNAMIC_DISPATCH(BlockTaskDispatch)(a, g, i0, i1, c_lo, c_hi, nullptr, 0, 0);
    };
    if (parallel) pool->parallel_for(tasks_unsplit, fn);
    else for (int t = 0; t < tasks_unsplit; ++t) fn(t);
    return;
  }
  const int nc = c_hi - c_lo;
  const size_t stride = size_t(hd) + 2;
  thread_local std::vector<float> part;
  part.resize(size_t(a.n_q) * a.n_heads * size_t(nc) * stride);
  float* const pp = part.data();  // workers must not name the thread_local: they have their own
  auto fn = [&](int t) {
    const int c = t % nc, rest = t / nc, g = rest % a.n_kv_heads, b = rest / a.n_kv_heads;
    const int i0 = b * P, i1 = std::min(a.n_q, i0 + P);
    HWY_DYNAMIC_DISPATCH(BlockTaskDispatch)(a, g, i0, i1, c_lo + c, c_lo + c + 1, pp, c_lo, nc);
  };
  pool->parallel_for(tasks_unsplit * nc, fn);
  for (int i = 0; i < a.n_q; ++i)
    for (int h = 0; h < a.n_heads; ++h) {
      float m = -INFINITY, l = 0;
      float* o = a.out + (int64_t(i) * a.n_heads + h) * hd;
      std::fill(o, o + hd, 0.0f);
      for (int c = 0; c < nc; ++c) {
        const float* p = pp + (size_t(i * a.n_heads + h) * size_t(nc) + size_t(c)) * stride;
        attn::merge_state(m, l, o, p[0], p[1], p + 2, hd);
      }
      const float inv = a.kbeg[i] < a.kend[i] ? 1.0f / l : 0.0f;
      for (int d = 0; d < hd; ++d) o[d] = a.kbeg[i] < a.kend[i] ? o[d] * inv : 0.0f;
    }
}

}  // namespace dflash
#endif
