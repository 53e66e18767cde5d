// The Gated DeltaNet's causal depthwise convolution as plain loops in the order
// kernels/gated_delta.h defines: the twin the SIMD kernel (kernels/cpu/gated_delta_conv_hwy.cpp)
// is tested against.
#include "kernels/fixed_exp.h"
#include "kernels/gated_delta.h"

namespace dflash::ref {

void causal_conv_silu(const ShortConvArgs& a) {
  const int K = a.kernel, C = a.channels;
  for (int t = 0; t < a.rows; ++t)
    for (int c = 0; c < C; ++c) {
      float s = 0.0f;
      for (int j = 0; j < K; ++j) {
        const int u = t - (K - 1) + j;  // input row this tap reads
        const float x = u >= 0 ? a.in[size_t(u) * C + c] : a.state[size_t(K - 1 + u) * C + c];
        s = s + a.weight[size_t(c) * K + j] * x;
      }
      a.out[size_t(t) * C + c] = fixed_exp::silu(s);
    }
}

}  // namespace dflash::ref
