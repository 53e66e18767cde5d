#pragma once
// Turns checkpoint tensors into the matrices and vectors the kernels read, checking every
// name, shape and dtype on the way.
#include <optional>
#include <string>
#include <vector>

#include "formats/safetensors.h"
#include "kernels/weight_matrix.h"

namespace dflash {

class WeightLoader {
 public:
  WeightLoader(const TensorStore& store, std::string dir) : store_(store), dir_(std::move(dir)) {}

  // The checkpoint's name prefix for the text model ("model.", "language_model.model.", ...),
  // found by where `probe` (e.g. "embed_tokens.weight") lives.
  std::string detect_prefix(const std::string& probe) const;

  const TensorView& get(const std::string& name, const std::vector<int64_t>& shape) const;
  const TensorView* try_get(const std::string& name) const { return store_.find(name); }
  // A [rows][cols] matrix in `type` (nullopt: the stored dtype); zero-copy when they agree.
  WeightMatrix matrix(const std::string& name, int64_t rows, int64_t cols, std::optional<WType> type) const;
  WeightMatrix matrix(const TensorView& t, std::optional<WType> type) const;
  std::vector<float> vector(const std::string& name, int64_t n) const;

 private:
  const TensorStore& store_;
  std::string dir_;
};

std::string shape_str(const std::vector<int64_t>& s);

}  // namespace dflash
