#pragma once
// Turns checkpoint tensors into the matrices and vectors the kernels read, checking every
// name, shape and dtype on the way.
#include <optional>
#include <string>
#include <vector>

#include "formats/safetensors.h"
#include "kernels/weight_matrix.h"
#include "models/tensor_source.h"

namespace dflash {

class WeightLoader final : public TensorSource {
 public:
  WeightLoader(const TensorStore& store, std::string dir) : store_(store), dir_(std::move(dir)) {}

  // The checkpoint's name prefix for the text model ("model.", "language_model.model.", ...),
  // found by where `probe` (e.g. "embed_tokens.weight") lives.
  std::string detect_prefix(const std::string& probe) const;

  const TensorView& get(const std::string& name, const std::vector<int64_t>& shape) const;
  const TensorView* try_get(const std::string& name) const { return store_.find(name); }
  // The checkpoint folder, which errors about a tensor that is not there name.
  const std::string& dir() const { return dir_; }
  bool contains(const std::string& name) const override { return try_get(name) != nullptr; }
  // A [rows][cols] matrix in `type` (nullopt: the stored dtype); zero-copy when they agree.
  // Hugging Face rows are the reference order: qk_head_dim must be 0.
  WeightMatrix matrix(const std::string& name, int64_t rows, int64_t cols, std::optional<WType> type,
                      int64_t qk_head_dim = 0) const override;
  WeightMatrix matrix(const TensorView& t, std::optional<WType> type) const;
  std::vector<float> vector(const std::string& name, int64_t n) const override;
  // Any tensor of exactly `shape`, as fp32 values in stored order.
  std::vector<float> values(const std::string& name, const std::vector<int64_t>& shape) const;

 private:
  const TensorStore& store_;
  std::string dir_;
};

std::string shape_str(const std::vector<int64_t>& s);

}  // namespace dflash
