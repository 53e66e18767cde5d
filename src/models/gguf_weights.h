#pragma once
// GGUF tensors as WeightMatrix / float vectors, shared by the target and draft GGUF loaders.
// Tensors whose type the kernels read (F32, F16, BF16, Q8_0, Q4_0, Q4_K, Q6_K) stay in the
// mapping; only a different --weights, or llama's q/k row order, costs a copy.
#include <optional>
#include <string>
#include <vector>

#include "formats/gguf.h"
#include "kernels/weight_matrix.h"
#include "models/tensor_source.h"

namespace dflash {

// The kernels' format for a ggml tensor type; false for a type they cannot read.
bool gguf_wtype(uint32_t ggml_type, WType& out);
// The inverse for the formats `dflash convert` writes (f32, f16, bf16, q8_0, q4_0); throws
// for others.
GgmlType ggml_type_of(WType t);
// llama.cpp's general.file_type number (LLAMA_FTYPE_*) for a file mostly of type t.
uint32_t gguf_file_type(WType t);

// llama.cpp's converter reorders the q/k rows of llama-architecture models inside each head
// (rotate-half pairs (i, i+hd/2) become adjacent rows (2i, 2i+1)) because its llama RoPE is
// the interleaved kind; qwen2/qwen3 keep Hugging Face's order. Maps a Hugging Face row to
// the GGUF row.
inline int64_t llama_qk_gguf_row(int64_t hf_row, int64_t head_dim) {
  const int64_t h = hf_row / head_dim, w = hf_row % head_dim, half = head_dim / 2;
  return h * head_dim + 2 * (w % half) + w / half;
}

class GgufWeights final : public TensorSource {
 public:
  explicit GgufWeights(const GgufFile& f) : f_(f) {}

  bool contains(const std::string& name) const override { return f_.tensor(name) != nullptr; }

  // The tensor, checked to have shape `ne` (innermost first) and a readable type.
  const GgufTensor& get(const std::string& name, std::vector<int64_t> ne) const;
  // rows x cols, in its own type or converted to `type`; `qk_head_dim` > 0 undoes
  // llama.cpp's per-head q/k row order.
  WeightMatrix matrix(const std::string& name, int64_t rows, int64_t cols, std::optional<WType> type,
                      int64_t qk_head_dim = 0) const override;
  // A vector stored as F32, F16 or BF16.
  std::vector<float> vector(const std::string& name, int64_t n) const override;

 private:
  const GgufFile& f_;
};

}  // namespace dflash
