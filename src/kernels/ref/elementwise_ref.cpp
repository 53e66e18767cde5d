// Plain twins of the SIMD element-wise kernels: the SiLU-gated product with libm's expf, and
// the f32 -> f16 conversion, one element at a time.
#include <cmath>

#include "kernels/kernels.h"
#include "kernels/numeric.h"

namespace dflash::ref {

void silu_mul(const float* gate, const float* up, int64_t n, float* out) {
  for (int64_t i = 0; i < n; ++i) {
    const float g = gate[i];
    out[i] = (g / (1.0f + std::exp(-g))) * up[i];
  }
}

void f32_to_f16_row(const float* x, int64_t n, uint16_t* out) {
  for (int64_t i = 0; i < n; ++i) out[i] = f32_to_f16(x[i]);
}

}  // namespace dflash::ref
