// Plain reference matmul: dequantize each weight row, then a sequential dot product; the
// block-quantized formats take the int8 path (kernels/cpu/quant_act.h).
#include <vector>

#include "kernels/cpu/quant_act.h"
#include "kernels/kernels.h"

namespace dflash::ref {

void matmul(const float* x, int M, const WeightMatrix& w, float* y) {
  if (uses_int8_path(w.type)) {
    QuantActs a;
    ref::quantize_acts(x, M, w.cols, a);
    return ref::qmatmul(a, M, w, y);
  }
  std::vector<float> row(size_t(w.cols));
  for (int64_t n = 0; n < w.rows; ++n) {
    dequantize_row(w, n, row.data());
    for (int m = 0; m < M; ++m) {
      const float* xm = x + int64_t(m) * w.cols;
      float s = 0;
      for (int64_t k = 0; k < w.cols; ++k) s += row[size_t(k)] * xm[k];
      y[int64_t(m) * w.rows + n] = s;
    }
  }
}

}  // namespace dflash::ref
