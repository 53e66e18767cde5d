// The Gated DeltaNet recurrence (kernels/gated_delta.h) with the state rows in SIMD vectors
// over the value dimension: lane c does exactly the scalar element c's operations in the same
// order (separate multiply and add, as the definition says), so the result is the reference
// twin's bit for bit. Value heads go to the thread pool; each owns its state and its output
// columns, so the split cannot change a value.
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

// dv = NV whole vectors: the column sums m and o live in NV registers for the whole pass over
// the rows of the state (a register tile, as the matmul kernels keep theirs), and the decayed
// state is formed again in pass 2 with the same rounding instead of being stored in pass 1, so
// the state is read twice and written once per row. Same operations per element, same order.
template <int NV>
void GatedDeltaHeadTiled(const GatedDeltaArgs& a, int h) {
  const int dk = a.dk, dv = a.dv;
  const hn::ScalableTag<float> df;
  const size_t L = hn::Lanes(df);
  using V = hn::Vec<decltype(df)>;
  gdn::run_value_head(a, h, [&](const float* s_in, float* s, const float* q, const float* k, const float* v,
                                float alpha, float beta, float* o) {
    const V va = hn::Set(df, alpha), vb = hn::Set(df, beta);
    V acc[NV];
    for (int j = 0; j < NV; ++j) acc[j] = hn::Zero(df);
    for (int i = 0; i < dk; ++i) {
      const float* row = s_in + size_t(i) * dv;
      const V vk = hn::Set(df, k[i]);
      for (int j = 0; j < NV; ++j) acc[j] = hn::Add(acc[j], hn::Mul(hn::Mul(va, hn::LoadU(df, row + j * L)), vk));
    }
    V d[NV];
    for (int j = 0; j < NV; ++j) {
      d[j] = hn::Mul(vb, hn::Sub(hn::LoadU(df, v + j * L), acc[j]));
      acc[j] = hn::Zero(df);
    }
    for (int i = 0; i < dk; ++i) {
      const float* row = s_in + size_t(i) * dv;
      float* out = s + size_t(i) * dv;
      const V vk = hn::Set(df, k[i]), vq = hn::Set(df, q[i]);
      for (int j = 0; j < NV; ++j) {
        const V x = hn::Add(hn::Mul(va, hn::LoadU(df, row + j * L)), hn::Mul(vk, d[j]));
        hn::StoreU(x, df, out + j * L);
        acc[j] = hn::Add(acc[j], hn::Mul(x, vq));
      }
    }
    if (o)
      for (int j = 0; j < NV; ++j) hn::StoreU(acc[j], df, o + j * L);
  });
}

void GatedDeltaHead(const GatedDeltaArgs& a, int h) {
  const int dk = a.dk, dv = a.dv;
  {
    const hn::ScalableTag<float> df;
    const int L = int(hn::Lanes(df));
    if (dv % L == 0) {
      switch (dv / L) {
        case 1: return GatedDeltaHeadTiled<1>(a, h);
        case 2: return GatedDeltaHeadTiled<2>(a, h);
        case 4: return GatedDeltaHeadTiled<4>(a, h);
        case 8: return GatedDeltaHeadTiled<8>(a, h);
        case 16: return GatedDeltaHeadTiled<16>(a, h);
        default: break;
      }
    }
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
