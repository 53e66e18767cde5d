// The Gated DeltaNet's conv state (kernels/gated_delta.h): a copy of rows.
#include <cstring>

#include "kernels/gated_delta.h"

namespace dflash {

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
