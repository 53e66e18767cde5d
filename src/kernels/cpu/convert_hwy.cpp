// f32 -> f16 rows in SIMD, for the KV cache: an f16 cache converts every new key and value,
// and the scalar conversion (numeric.h), one branchy call per element, made that store several
// times slower than an f32 cache's memcpy. Same bits as the scalar one:
// round to nearest even, subnormals kept, overflow to infinity, and a NaN of either sign
// becomes that sign's quiet NaN 0x7e00 (the hardware would otherwise keep payload bits).
// Only the x86 targets with a native conversion (F16C, AVX-512) take the SIMD path, the ones
// the tests run here; the others (SSE, EMU128, SCALAR, and ARM until a machine there checks
// it) keep the scalar loop, whose rounding is the definition.
#undef HWY_TARGET_INCLUDE
#define HWY_TARGET_INCLUDE "kernels/cpu/convert_hwy.cpp"
#include <hwy/foreach_target.h>  // IWYU pragma: keep
#include <hwy/highway.h>

#include "kernels/kernels.h"
#include "kernels/numeric.h"

#undef DFLASH_NATIVE_F16
#if HWY_TARGET == HWY_AVX2 || HWY_TARGET == HWY_AVX3 || HWY_TARGET == HWY_AVX3_DL
#define DFLASH_NATIVE_F16 1  // vcvtps2ph with rounding to nearest even
#else
#define DFLASH_NATIVE_F16 0
#endif

HWY_BEFORE_NAMESPACE();
namespace dflash {
namespace HWY_NAMESPACE {
namespace hn = hwy::HWY_NAMESPACE;

void F32ToF16Row(const float* x, int64_t n, uint16_t* out) {
  int64_t i = 0;
#if DFLASH_NATIVE_F16
  const hn::ScalableTag<float> d;
  const hn::RebindToUnsigned<decltype(d)> du;
  const hn::Rebind<hwy::float16_t, decltype(d)> dh;
  const int64_t N = int64_t(hn::Lanes(d));
  const auto quiet_nan = hn::BitCast(d, hn::Set(du, 0x7fc00000u));
  for (; i + N <= n; i += N) {
    auto v = hn::LoadU(d, x + i);
    v = hn::IfThenElse(hn::IsNaN(v), hn::CopySign(quiet_nan, v), v);
    hn::StoreU(hn::DemoteTo(dh, v), dh, reinterpret_cast<hwy::float16_t*>(out + i));
  }
#endif
  for (; i < n; ++i) out[i] = f32_to_f16(x[i]);
}

}  // namespace HWY_NAMESPACE
}  // namespace dflash
HWY_AFTER_NAMESPACE();

#if HWY_ONCE
namespace dflash {
HWY_EXPORT(F32ToF16Row);
void f32_to_f16_row(const float* x, int64_t n, uint16_t* out) { HWY_DYNAMIC_DISPATCH(F32ToF16Row)(x, n, out); }
}  // namespace dflash
#endif
