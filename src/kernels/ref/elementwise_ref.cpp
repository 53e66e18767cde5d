// Plain twin of the SIMD SiLU-gated product: libm's expf, one element at a time.
#include <cmath>

#include "kernels/kernels.h"

namespace dflash::ref {

void silu_mul(const float* gate, const float* up, int64_t n, float* out) {
  for (int64_t i = 0; i < n; ++i) {
    const float g = gate[i];
    out[i] = (g / (1.0f + std::exp(-g))) * up[i];
  }
}

}  // namespace dflash::ref
