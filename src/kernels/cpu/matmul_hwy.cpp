// Fast matmul for the float weight formats (F32, F16, BF16), SIMD through Highway with run-time
// dispatch; matmul() hands the block-quantized formats to qmatmul (int8 activations).
//
// Each weight row is decoded to fp32 vectors once per group of up to kMaxRows activation rows
// and fused into one accumulator per row. The accumulation order of y[m][n] depends only on
// K and the SIMD width, never on M or the thread split: that is what makes decode, verify and
// prefill bitwise identical (see kernels.h).
#undef HWY_TARGET_INCLUDE
#define HWY_TARGET_INCLUDE "kernels/cpu/matmul_hwy.cpp"
#include <hwy/foreach_target.h>  // IWYU pragma: keep
#include <hwy/highway.h>

#include <algorithm>

#include "kernels/cpu/quant_act.h"
#include "kernels/kernels.h"
#include "kernels/numeric.h"

HWY_BEFORE_NAMESPACE();
namespace dflash {
namespace HWY_NAMESPACE {
namespace hn = hwy::HWY_NAMESPACE;

// Float weight formats only; the block-quantized ones go through qmatmul (int8 activations).
using DF = hn::CappedTag<float, 16>;

template <WType T>
HWY_INLINE float ScalarWeight(const uint8_t* row, int64_t k) {
  if constexpr (T == WType::F32) return reinterpret_cast<const float*>(row)[k];
  if constexpr (T == WType::BF16) return bf16_to_f32(reinterpret_cast<const uint16_t*>(row)[k]);
  if constexpr (T == WType::F16) return f16_to_f32(reinterpret_cast<const uint16_t*>(row)[k]);
  return 0.0f;
}

constexpr int kMaxRows = 8;

// acc[r] += w * x[r][k .. k+Lanes), for the R activation rows sharing this weight vector.
template <int R>
HWY_INLINE void FmaRows(hn::Vec<DF>* acc, hn::Vec<DF> w, const float* x, int64_t K, int64_t k) {
  const DF df;
#pragma GCC unroll 8
  for (int r = 0; r < R; ++r) acc[r] = hn::MulAdd(w, hn::LoadU(df, x + r * K + k), acc[r]);
}

// y[r * ldy] = dot(W row, x[r]) for r < R. Each weight vector is decoded once and used by all
// R rows; the order in which terms are added depends on K and the SIMD width only.
template <WType T, int R>
HWY_INLINE void DotRows(const uint8_t* row, int64_t K, const float* x, float* y, int64_t ldy) {
  const DF df;
  const int64_t L = int64_t(hn::Lanes(df));
  hn::Vec<DF> acc[R];
#pragma GCC unroll 8
  for (int r = 0; r < R; ++r) acc[r] = hn::Zero(df);
  int64_t done = 0;
  if constexpr (T == WType::F32) {
    const float* p = reinterpret_cast<const float*>(row);
    for (; done + L <= K; done += L) FmaRows<R>(acc, hn::LoadU(df, p + done), x, K, done);
  } else if constexpr (T == WType::BF16) {
    const hn::Rebind<uint16_t, DF> d16;
    const hn::Rebind<uint32_t, DF> d32;
    const uint16_t* p = reinterpret_cast<const uint16_t*>(row);
    for (; done + L <= K; done += L)
      FmaRows<R>(acc, hn::BitCast(df, hn::ShiftLeft<16>(hn::PromoteTo(d32, hn::LoadU(d16, p + done)))), x, K, done);
  } else if constexpr (T == WType::F16) {
    const hn::Rebind<hwy::float16_t, DF> dh;
    const hwy::float16_t* p = reinterpret_cast<const hwy::float16_t*>(row);
    for (; done + L <= K; done += L) FmaRows<R>(acc, hn::PromoteTo(df, hn::LoadU(dh, p + done)), x, K, done);
  }
#pragma GCC unroll 8
  for (int r = 0; r < R; ++r) {
    float s = hn::GetLane(hn::SumOfLanes(df, acc[r]));
    for (int64_t k = done; k < K; ++k) s += ScalarWeight<T>(row, k) * x[r * K + k];
    y[r * ldy] = s;
  }
}

template <WType T>
void MatmulRange(const float* x, int M, const WeightMatrix& w, float* y, int64_t n0, int64_t n1) {
  const int64_t K = w.cols, N = w.rows;
  int m = 0;
  for (; m + kMaxRows <= M; m += kMaxRows)
    for (int64_t n = n0; n < n1; ++n) DotRows<T, kMaxRows>(w.row(n), K, x + m * K, y + m * N + n, N);
  const int rest = M - m;
  for (int64_t n = n0; n < n1 && rest > 0; ++n) {
    const float* xm = x + m * K;
    float* ym = y + m * N + n;
    switch (rest) {
      case 1: DotRows<T, 1>(w.row(n), K, xm, ym, N); break;
      case 2: DotRows<T, 2>(w.row(n), K, xm, ym, N); break;
      case 3: DotRows<T, 3>(w.row(n), K, xm, ym, N); break;
      case 4: DotRows<T, 4>(w.row(n), K, xm, ym, N); break;
      case 5: DotRows<T, 5>(w.row(n), K, xm, ym, N); break;
      case 6: DotRows<T, 6>(w.row(n), K, xm, ym, N); break;
      default: DotRows<T, 7>(w.row(n), K, xm, ym, N); break;
    }
  }
}

void MatmulRangeDispatch(const float* x, int M, const WeightMatrix& w, float* y, int64_t n0, int64_t n1) {
  switch (w.type) {
    case WType::F32: return MatmulRange<WType::F32>(x, M, w, y, n0, n1);
    case WType::F16: return MatmulRange<WType::F16>(x, M, w, y, n0, n1);
    case WType::BF16: return MatmulRange<WType::BF16>(x, M, w, y, n0, n1);
    default: return;  // the block formats take the int8 path (qmatmul_hwy.cpp)
  }
}

const char* TargetName() { return hwy::TargetName(HWY_TARGET); }

}  // namespace HWY_NAMESPACE
}  // namespace dflash
HWY_AFTER_NAMESPACE();

#if HWY_ONCE
namespace dflash {
HWY_EXPORT(MatmulRangeDispatch);
HWY_EXPORT(TargetName);

void matmul(const float* x, int M, const WeightMatrix& w, float* y, ThreadPool* pool) {
  if (uses_int8_path(w.type)) return qmatmul(x, M, w, y, pool);
  // Chunks of weight rows small enough to stay in L2 while every activation row passes over
  // them; the split never cuts a reduction, so it cannot change any result.
  const int64_t rb = int64_t(row_bytes(w.type, w.cols));
  int64_t chunk = std::max<int64_t>(4, (128 * 1024) / std::max<int64_t>(rb, 1));
  const int threads = pool ? pool->size() : 1;
  chunk = std::min(chunk, std::max<int64_t>(4, (w.rows + threads * 4 - 1) / (threads * 4)));
  const int tasks = int((w.rows + chunk - 1) / chunk);
  auto fn = [&](int t) {
    const int64_t n0 = int64_t(t) * chunk, n1 = std::min(w.rows, n0 + chunk);
    HWY_DYNAMIC_DISPATCH(MatmulRangeDispatch)(x, M, w, y, n0, n1);
  };
  // Waking workers costs microseconds: small products run on the calling thread.
  const bool small = int64_t(M) * w.rows * w.cols < (int64_t(1) << 21);
  if (pool && !small) pool->parallel_for(tasks, fn);
  else for (int t = 0; t < tasks; ++t) fn(t);
}

void matmul_multi(const float* x, int M, std::initializer_list<MatmulOut> outs, ThreadPool* pool) {
  bool all_int8 = true;
  for (const MatmulOut& o : outs) all_int8 = all_int8 && uses_int8_path(o.w->type);
  if (all_int8) return qmatmul_multi(x, M, outs.begin(), int(outs.size()), pool);
  for (const MatmulOut& o : outs) matmul(x, M, *o.w, o.y, pool);
}

const char* simd_target_name() { return HWY_DYNAMIC_DISPATCH(TargetName)(); }

}  // namespace dflash
#endif
