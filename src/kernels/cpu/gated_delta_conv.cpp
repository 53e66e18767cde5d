// The Gated DeltaNet's causal depthwise convolution and its state (kernels/gated_delta.h), as
// plain loops in the defined order: K multiply-adds per channel and row, negligible next to
// the projections around it, so this is its own reference.
#include <cmath>
#include <cstring>

#include "kernels/gated_delta.h"

namespace dflash {

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
      a.out[size_t(t) * C + c] = s / (1.0f + std::exp(-s));
    }
}

void roll_conv_state(const float* state, const float* in, int rows, int channels, int kernel, float* state_next) {
  const int keep = kernel - 1;
  const size_t row = size_t(channels) * sizeof(float);
  // Row r of the result is row (rows + r) of [state ; in]; going forwards never overwrites a
  // state row that is still to be read, even when state_next == state.
  for (int r = 0; r < keep; ++r) {
    const int u = rows + r - keep;  // index into in when >= 0
    const float* src = u >= 0 ? in + size_t(u) * channels : state + size_t(keep + u) * channels;
    if (src != state_next + size_t(r) * channels) std::memmove(state_next + size_t(r) * channels, src, row);
  }
}

}  // namespace dflash
