#pragma once
// Tensors by checkpoint name: what the table walkers (tensor_table.h) read from. The two
// sources are a Hugging Face folder's WeightLoader and a GGUF file's GgufWeights; each checks
// the shape asked for and keeps its own error messages (missing tensor, shape, dtype).
#include <cstdint>
#include <functional>
#include <optional>
#include <string>
#include <vector>

#include "kernels/weight_matrix.h"

namespace dflash {

class TensorSource {
 public:
  virtual ~TensorSource() = default;
  virtual bool contains(const std::string& name) const = 0;
  // rows x cols in `type` (nullopt: as stored, zero-copy); qk_head_dim > 0: the stored rows
  // are in llama.cpp's per-head q/k order, to be put back (only GGUF files store them so).
  virtual WeightMatrix matrix(const std::string& name, int64_t rows, int64_t cols, std::optional<WType> type,
                              int64_t qk_head_dim) const = 0;
  virtual std::vector<float> vector(const std::string& name, int64_t n) const = 0;
};

// What both sources do when a tensor must change type or row order: an owned rows x cols
// matrix in `type`, written row by row by encode_row(r, out_row, scratch) with `scratch`
// holding cols floats (no full fp32 copy of a large matrix). Refuses columns that are not
// whole blocks of `type`, naming the tensor and its file.
WeightMatrix encode_rows(const std::string& file, const std::string& name, int64_t rows, int64_t cols, WType type,
                         const std::function<void(int64_t r, uint8_t* out_row, float* scratch)>& encode_row);

}  // namespace dflash
