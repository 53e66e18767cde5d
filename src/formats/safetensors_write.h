#pragma once
// A streaming safetensors writer: the header is known from the shapes alone, so tensors are
// written row by row as a caller produces them and a multi-GB checkpoint never sits in memory.
#include <cstdint>
#include <functional>
#include <string>
#include <vector>

#include "formats/safetensors.h"

namespace dflash {

struct TensorToWrite {
  std::string name;
  DType dtype = DType::F32;
  std::vector<int64_t> shape;  // rows = product of all but the last dimension
};

// Fills one row (the last dimension) of tensor `index`, already in its dtype's bytes.
using RowWriter = std::function<void(size_t index, int64_t row, uint8_t* out)>;

// Writes `path` with the tensors in the given order (data offsets in that order too) and a
// `__metadata__` of {"format": "pt"}, as Hugging Face writes it.
void write_safetensors(const std::string& path, const std::vector<TensorToWrite>& tensors, const RowWriter& fill);

}  // namespace dflash
