// The Gated DeltaNet recurrence (kernels/gated_delta.h) with the state's columns in SIMD
// vectors over the value dimension: lane c does exactly the scalar element c's operations in the same
// order (separate multiply and add, as the definition says), so the result is the reference
// twin's bit for bit. Value heads go to the thread pool; each owns its state and its output
// columns, so the split cannot change a value.
#include <algorithm>

#undef HWY_TARGET_INCLUDE
#define HWY_TARGET_INCLUDE "kernels/cpu/gated_delta_hwy.cpp"
#include <hwy/foreach_target.h>  // IWYU pragma: keep
#include <hwy/highway.h>

#include "kernels/gated_delta.h"
#include "kernels/gated_delta_rows.h"
#include "util/thread_pool.h"

HWY_BEFORE_NAMESPACE();
namespace dflash {
namespace HWY_NAMESPACE {
namespace hn = hwy::HWY_NAMESPACE;

// One sweep over a column block's dk state rows for row t: S'[i] = alpha_t S[i] + k_t[i] d_t;
// with a readout o += S'[i] q_t[i]; and, when row t+1 follows in the block, that row's first
// pass m' += (alpha_t+1 S'[i]) k_t+1[i] on the value just formed, so that each row costs one
// sweep instead of two. When nobody reads the state between rows t and t+1 (kStoreDecayed),
// the sweep stores alpha_t+1 S'[i], the product row t+1 begins with, and row t+1's sweep
// (kDecayedIn) takes it as is instead of multiplying again. Per element these are the
// definition's operations in its order: the plain twin's bits.
template <int NB, bool kReadout, bool kNext, bool kStoreDecayed, bool kDecayedIn, class D, class V = hn::Vec<D>>
HWY_INLINE void Sweep(D df, int dk, int dv, const float* sp, float* dp, float alpha, const float* k, const V* d,
                      const float* q, V* o, float alpha_next, const float* k_next, V* m_next) {
  static_assert(kNext || !kStoreDecayed, "a decayed state is stored only for a following row");
  const size_t L = hn::Lanes(df);
  const V va = hn::Set(df, alpha), van = hn::Set(df, alpha_next);
  for (int i = 0; i < dk; ++i) {
    const float* row = sp + size_t(i) * dv;
    float* out = dp + size_t(i) * dv;
    const V vk = hn::Set(df, k[i]);
    for (int j = 0; j < NB; ++j) {
      const V in = kDecayedIn ? hn::LoadU(df, row + j * L) : hn::Mul(va, hn::LoadU(df, row + j * L));
      const V x = hn::Add(in, hn::Mul(vk, d[j]));
      if constexpr (kReadout) o[j] = hn::Add(o[j], hn::Mul(x, hn::Set(df, q[i])));
      if constexpr (kNext) {
        const V y = hn::Mul(van, x);
        m_next[j] = hn::Add(m_next[j], hn::Mul(y, hn::Set(df, k_next[i])));
        hn::StoreU(kStoreDecayed ? y : x, df, out + j * L);
      } else {
        hn::StoreU(x, df, out + j * L);
      }
    }
  }
}

// Sweep with its flags chosen at run time (one branch per row and block, not per element).
template <int NB, class D, class V = hn::Vec<D>>
void SweepAny(bool readout, bool next, bool store_decayed, bool decayed_in, D df, int dk, int dv, const float* sp,
              float* dp, float alpha, const float* k, const V* d, const float* q, V* o, float an, const float* kn,
              V* m_next) {
#define DFLASH_SWEEP(R, N, S, I) Sweep<NB, R, N, S, I>(df, dk, dv, sp, dp, alpha, k, d, q, o, an, kn, m_next)
  const int code = (readout ? 8 : 0) | (next ? 4 : 0) | (store_decayed ? 2 : 0) | (decayed_in ? 1 : 0);
  switch (code) {
    case 0: return DFLASH_SWEEP(false, false, false, false);
    case 1: return DFLASH_SWEEP(false, false, false, true);
    case 4: return DFLASH_SWEEP(false, true, false, false);
    case 5: return DFLASH_SWEEP(false, true, false, true);
    case 6: return DFLASH_SWEEP(false, true, true, false);
    case 7: return DFLASH_SWEEP(false, true, true, true);
    case 8: return DFLASH_SWEEP(true, false, false, false);
    case 9: return DFLASH_SWEEP(true, false, false, true);
    case 12: return DFLASH_SWEEP(true, true, false, false);
    case 13: return DFLASH_SWEEP(true, true, false, true);
    case 14: return DFLASH_SWEEP(true, true, true, false);
    case 15: return DFLASH_SWEEP(true, true, true, true);
    default: HWY_ASSERT(false);
  }
#undef DFLASH_SWEEP
}

// Column blocks: a state column's update needs only its own column (m[c], d[c], o[c] are
// per column), so the kernel takes NB vectors of columns at a time and runs every row of a
// chunk over that block while it sits in cache. The column sums live in NB registers each:
// NB independent chains of adds, whose latency shows through when there are few of them, so
// the widest block that divides dv wins even where it outgrows L1 (8 vectors: dv 128 at
// AVX-512, a whole 64 KiB head state). Same operations per element, same order: the plain
// twin's bits.
template <int NB>
void GatedDeltaHeadBlocked(const GatedDeltaArgs& a, int h) {
  const int dk = a.dk, dv = a.dv;
  const hn::ScalableTag<float> df;
  const size_t L = hn::Lanes(df);
  using V = hn::Vec<decltype(df)>;
  constexpr int R = 8;  // rows prepared at a time
  const gdn::HeadStates st(a, h);
  // q^ is set and read only for rows with a readout (Sweep's kReadout): no zeroing per call.
  alignas(64) float qh[R][gdn::kMaxHeadDim], kn[R][gdn::kMaxHeadDim], o[R][gdn::kMaxHeadDim];
  float alpha[R], beta[R];
  bool readout[R];
  const float* src = st.in;
  for (int t0 = 0; t0 < a.rows; t0 += R) {
    const int n = std::min(R, a.rows - t0);
    for (int r = 0; r < n; ++r) readout[r] = gdn::prepare_row(a, h, t0 + r, qh[r], kn[r], alpha[r], beta[r]);
    for (int c0 = 0; c0 < dv; c0 += NB * int(L)) {
      const float* sp = src + c0;
      // The first row's first pass: m = sum_i (alpha S[i]) k[i].
      V m[NB];
      for (int j = 0; j < NB; ++j) m[j] = hn::Zero(df);
      {
        const V va = hn::Set(df, alpha[0]);
        for (int i = 0; i < dk; ++i) {
          const float* row = sp + size_t(i) * dv;
          const V vk = hn::Set(df, kn[0][i]);
          for (int j = 0; j < NB; ++j) m[j] = hn::Add(m[j], hn::Mul(hn::Mul(va, hn::LoadU(df, row + j * L)), vk));
        }
      }
      bool decayed = false;  // sp holds alpha_r S (stored so by the previous row's sweep)
      for (int r = 0; r < n; ++r) {
        const int t = t0 + r;
        float* dp = st.dst(a, t) + c0;
        const float* v = gdn::row_v(a, h, t) + c0;
        const V vb = hn::Set(df, beta[r]);
        V d[NB], acc[NB], next[NB];
        for (int j = 0; j < NB; ++j) {
          d[j] = hn::Mul(vb, hn::Sub(hn::LoadU(df, v + j * L), m[j]));
          acc[j] = hn::Zero(df);
          next[j] = hn::Zero(df);
        }
        const bool more = r + 1 < n;
        // The state after the last quiet row is kept (state_mid or state_out): stored as is.
        const bool store_decayed = more && t != a.quiet - 1;
        SweepAny<NB>(readout[r], more, store_decayed, decayed, df, dk, dv, sp, dp, alpha[r], kn[r], d, qh[r], acc,
                     more ? alpha[r + 1] : 0.0f, more ? kn[r + 1] : nullptr, next);
        if (readout[r])
          for (int j = 0; j < NB; ++j) hn::StoreU(acc[j], df, o[r] + c0 + j * L);
        for (int j = 0; j < NB; ++j) m[j] = next[j];
        sp = dp;
        decayed = store_decayed;
      }
    }
    src = st.dst(a, t0 + n - 1);
    for (int r = 0; r < n; ++r)
      if (readout[r]) gdn::finish_readout(a, h, t0 + r, o[r]);
  }
  st.finish(a);
}

void GatedDeltaHead(const GatedDeltaArgs& a, int h) {
  const int dk = a.dk, dv = a.dv;
  {
    const hn::ScalableTag<float> df;
    const int L = int(hn::Lanes(df));
    if (dv % (8 * L) == 0) return GatedDeltaHeadBlocked<8>(a, h);
    if (dv % (4 * L) == 0) return GatedDeltaHeadBlocked<4>(a, h);
    if (dv % (2 * L) == 0) return GatedDeltaHeadBlocked<2>(a, h);
    if (dv % L == 0) return GatedDeltaHeadBlocked<1>(a, h);
  }
  const hn::ScalableTag<float> df;
  const int L = int(hn::Lanes(df));
  gdn::run_value_head(a, h, [&](const float* s_in, float* s, const float* q, const float* k, const float* v,
                                float alpha, float beta, float* o) {
    alignas(64) float m[gdn::kMaxHeadDim], d[gdn::kMaxHeadDim];
    for (int c = 0; c < dv; ++c) m[c] = 0.0f;
    const auto va = hn::Set(df, alpha);
    for (int i = 0; i < dk; ++i) {
      const float* src = s_in + size_t(i) * dv;
      float* dst = s + size_t(i) * dv;
      const auto vk = hn::Set(df, k[i]);
      int c = 0;
      for (; c + L <= dv; c += L) {
        const auto x = hn::Mul(va, hn::LoadU(df, src + c));
        hn::StoreU(x, df, dst + c);
        hn::Store(hn::Add(hn::Load(df, m + c), hn::Mul(x, vk)), df, m + c);
      }
      for (; c < dv; ++c) {
        const float x = alpha * src[c];
        dst[c] = x;
        m[c] = m[c] + x * k[i];
      }
    }
    for (int c = 0; c < dv; ++c) d[c] = beta * (v[c] - m[c]);
    if (o)
      for (int c = 0; c < dv; ++c) o[c] = 0.0f;
    for (int i = 0; i < dk; ++i) {
      float* row = s + size_t(i) * dv;
      const auto vk = hn::Set(df, k[i]), vq = hn::Set(df, q[i]);
      int c = 0;
      for (; c + L <= dv; c += L) {
        const auto x = hn::Add(hn::LoadU(df, row + c), hn::Mul(vk, hn::Load(df, d + c)));
        hn::StoreU(x, df, row + c);
        if (o) hn::StoreU(hn::Add(hn::LoadU(df, o + c), hn::Mul(x, vq)), df, o + c);
      }
      for (; c < dv; ++c) {
        const float x = row[c] + k[i] * d[c];
        row[c] = x;
        if (o) o[c] = o[c] + x * q[i];
      }
    }
  });
}

}  // namespace HWY_NAMESPACE
}  // namespace dflash
HWY_AFTER_NAMESPACE();

#if HWY_ONCE
namespace dflash {
HWY_EXPORT(GatedDeltaHead);

void gated_delta_net(const GatedDeltaArgs& a, ThreadPool* pool) {
  auto head = [&](int h) { HWY_DYNAMIC_DISPATCH(GatedDeltaHead)(a, h); };
  // A head-row is dk*dv*4 flops; below ~64k of them a pool wake-up costs more than it saves.
  const double work = double(a.rows) * a.nv * a.dk * a.dv;
  if (!pool || pool->size() == 1 || work < 65536.0 * 4) {
    for (int h = 0; h < a.nv; ++h) head(h);
  } else {
    pool->parallel_for(a.nv, head);
  }
}

}  // namespace dflash
#endif
