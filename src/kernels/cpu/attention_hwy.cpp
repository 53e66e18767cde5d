// Fast attention: SIMD dot products and value accumulation, parallel over (row, head) pairs.
// Each (row, head) is computed start to end by one thread in key order, so the result does
// not depend on how many rows share the call.
#undef HWY_TARGET_INCLUDE
#define HWY_TARGET_INCLUDE "kernels/cpu/attention_hwy.cpp"
#include <hwy/foreach_target.h>  // IWYU pragma: keep
#include <hwy/highway.h>

#include <algorithm>
#include <cmath>
#include <vector>

#include "kernels/kernels.h"

HWY_BEFORE_NAMESPACE();
namespace dflash {
namespace HWY_NAMESPACE {
namespace hn = hwy::HWY_NAMESPACE;
using DF = hn::CappedTag<float, 16>;

HWY_INLINE float Dot(const float* a, const float* b, int n) {
  const DF df;
  const int L = int(hn::Lanes(df));
  auto acc = hn::Zero(df);
  int i = 0;
  for (; i + L <= n; i += L) acc = hn::MulAdd(hn::LoadU(df, a + i), hn::LoadU(df, b + i), acc);
  float s = hn::GetLane(hn::SumOfLanes(df, acc));
  for (; i < n; ++i) s += a[i] * b[i];
  return s;
}

HWY_INLINE void Axpy(float alpha, const float* x, float* y, int n) {
  const DF df;
  const int L = int(hn::Lanes(df));
  const auto va = hn::Set(df, alpha);
  int i = 0;
  for (; i + L <= n; i += L) hn::StoreU(hn::MulAdd(va, hn::LoadU(df, x + i), hn::LoadU(df, y + i)), df, y + i);
  for (; i < n; ++i) y[i] += alpha * x[i];
}

void AttendOne(const AttentionArgs& a, int i, int h, std::vector<float>& p) {
  const int group = a.n_heads / a.n_kv_heads;
  const int hd = a.head_dim;
  const float* q = a.q + (int64_t(i) * a.n_heads + h) * hd;
  const float* K = a.k_cache + int64_t(h / group) * a.capacity * hd;
  const float* V = a.v_cache + int64_t(h / group) * a.capacity * hd;
  float* o = a.out + (int64_t(i) * a.n_heads + h) * hd;
  const int b = a.kbeg[i], e = a.kend[i];
  p.resize(size_t(std::max(0, e - b)));
  float mx = -INFINITY;
  for (int j = b; j < e; ++j) {
    const float s = Dot(q, K + int64_t(j) * hd, hd) * a.scale;
    p[size_t(j - b)] = s;
    mx = std::max(mx, s);
  }
  float sum = 0;
  for (auto& v : p) sum += (v = std::exp(v - mx));
  std::fill(o, o + hd, 0.0f);
  for (int j = b; j < e; ++j) Axpy(p[size_t(j - b)], V + int64_t(j) * hd, o, hd);
  const float inv = e > b ? 1.0f / sum : 0.0f;
  for (int d = 0; d < hd; ++d) o[d] *= inv;
}

void AttendRange(const AttentionArgs& a, int t0, int t1) {
  thread_local std::vector<float> p;
  for (int t = t0; t < t1; ++t) AttendOne(a, t / a.n_heads, t % a.n_heads, p);
}

}  // namespace HWY_NAMESPACE
}  // namespace dflash
HWY_AFTER_NAMESPACE();

#if HWY_ONCE
namespace dflash {
HWY_EXPORT(AttendRange);

void attention(const AttentionArgs& a, ThreadPool* pool) {
  const int total = a.n_q * a.n_heads;
  const int threads = pool ? pool->size() : 1;
  const int per = std::max(1, total / (threads * 4));
  const int tasks = (total + per - 1) / per;
  auto fn = [&](int t) { HWY_DYNAMIC_DISPATCH(AttendRange)(a, t * per, std::min(total, (t + 1) * per)); };
  int64_t work = 0;  // multiply-adds, to keep tiny attention calls on the calling thread
  for (int i = 0; i < a.n_q; ++i) work += int64_t(a.kend[i] - a.kbeg[i]) * a.n_heads * a.head_dim;
  if (pool && work >= (int64_t(1) << 19)) pool->parallel_for(tasks, fn);
  else for (int t = 0; t < tasks; ++t) fn(t);
}

}  // namespace dflash
#endif
