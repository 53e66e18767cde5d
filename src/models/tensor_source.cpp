#include "models/tensor_source.h"

#include <vector>

#include "util/error.h"

namespace dflash {

WeightMatrix encode_rows(const std::string& file, const std::string& name, int64_t rows, int64_t cols, WType type,
                         const std::function<void(int64_t r, uint8_t* out_row, float* scratch)>& encode_row) {
  // Q8_0/Q4_0 need rows of whole 32-blocks, Q4_K/Q6_K of whole 256-super-blocks (llama.cpp
  // stores such tensors in another type instead): say which tensor and why rather than
  // failing in a kernel.
  if (cols % block_elems(type) != 0)
    throw file_error(file, "tensor '" + name + "' has " + std::to_string(cols) + " columns, not a multiple of " +
                               std::to_string(block_elems(type)) + ": cannot store it as " + wtype_name(type));
  uint8_t* buf = nullptr;
  WeightMatrix w = alloc_weight_matrix(type, rows, cols, &buf);
  const size_t rb = row_bytes(type, cols);
  std::vector<float> scratch(static_cast<size_t>(cols));
  for (int64_t r = 0; r < rows; ++r) encode_row(r, buf + size_t(r) * rb, scratch.data());
  return w;
}

}  // namespace dflash
