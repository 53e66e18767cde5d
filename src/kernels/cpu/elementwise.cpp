// Row-wise kernels whose cost is negligible next to the matmuls; written once, in plain loops
// with a fixed summation order so they are batch invariant by construction.
#include <cmath>

#include "kernels/kernels.h"

namespace dflash {

void rmsnorm(const float* x, int rows, int dim, const float* w, float eps, float* out) {
  for (int r = 0; r < rows; ++r) {
    const float* xr = x + int64_t(r) * dim;
    float* o = out + int64_t(r) * dim;
    float ss = 0;
    for (int i = 0; i < dim; ++i) ss += xr[i] * xr[i];
    const float inv = 1.0f / std::sqrt(ss / float(dim) + eps);
    for (int i = 0; i < dim; ++i) o[i] = (xr[i] * inv) * w[i];
  }
}

void rope_neox(float* x, int rows, int n_heads, int head_dim, const float* cos, const float* sin) {
  const int half = head_dim / 2;
  for (int r = 0; r < rows; ++r) {
    const float* c = cos + int64_t(r) * half;
    const float* s = sin + int64_t(r) * half;
    for (int h = 0; h < n_heads; ++h) {
      float* v = x + (int64_t(r) * n_heads + h) * head_dim;
      for (int i = 0; i < half; ++i) {
        const float a = v[i], b = v[i + half];
        v[i] = a * c[i] - b * s[i];
        v[i + half] = b * c[i] + a * s[i];
      }
    }
  }
}

}  // namespace dflash
