#pragma once
// Tensor tables: each model family lists its tensors once (what each one fills, its Hugging
// Face and GGUF names, its shape in terms of the config, when it is present), and the
// safetensors loaders, the GGUF loaders and the GGUF writer all walk that one list, so a
// tensor's name and shape are written in one place only. The tables themselves live beside
// their families (dense_tensors.h, dflash_tensors.h, dflash2_tensors.h).
#include <array>
#include <cstdint>
#include <optional>
#include <stdexcept>
#include <string>
#include <utility>
#include <vector>

#include "kernels/weight_matrix.h"
#include "models/tensor_source.h"

namespace dflash {

// The sizes shapes are written in; each family sets the ones its tensors use.
enum class Dim : uint8_t {
  Hidden,
  QDim,          // n_heads * head_dim
  KvDim,         // n_kv_heads * head_dim
  HeadDim,
  HalfHeadDim,   // one RoPE frequency per pair of dimensions
  Ffn,
  Vocab,
  Features,      // a draft's input: the tapped target layers side by side
  ConvSides,     // a DFlash2 convolution's two sides (static and dynamic kernels)
  ConvKernel,
  ConvRows,      // a DFlash2 kernel projection's rows: sides * kernel * groups
  SelectorRank,
  One,           // a size-1 axis (a depthwise convolution's input channels)
  QGateDim,      // gated attention's q_proj rows: query and gate, 2 * n_heads * head_dim
  LinChannels,   // Gated DeltaNet q|k|v channels: 2 * key_heads * key_dim + value_heads * value_dim
  LinValueDim,   // value_heads * value_dim
  LinValueHeads,
  LinHeadDim,    // value_dim: the gated norm's width
  LinKeyHeads,   // key_heads: the groups of Qwen3-Next's fused projections
  Count
};

// The values of the Dims for one config.
class TensorDims {
 public:
  TensorDims& set(Dim d, int64_t v) {
    v_[size_t(d)] = v;
    return *this;
  }
  int64_t operator[](Dim d) const { return v_[size_t(d)]; }

 private:
  std::array<int64_t, size_t(Dim::Count)> v_{};
};

// Outermost first, as Hugging Face writes shapes (GGUF lists them innermost first).
struct Shape {
  std::array<Dim, 3> dims{};
  int rank = 0;
  Shape() = default;
  Shape(Dim a) : dims{a}, rank(1) {}
  Shape(Dim a, Dim b) : dims{a, b}, rank(2) {}
  Shape(Dim a, Dim b, Dim c) : dims{a, b, c}, rank(3) {}
};

enum class Scope : uint8_t { Model, PerLayer };

// When a tensor is there at all.
enum class When : uint8_t {
  Always,
  WithQkNorm,  // architectures with per-head q/k RMSNorm (Qwen3)
  WithBias,    // q/k/v projections with biases (Qwen2, attention_bias)
  Untied,      // a head of its own (tie_word_embeddings false)
  IfStored,    // optional: read when the checkpoint has it
  AttentionLayer,  // per-layer rows of a hybrid's full-attention layers only
  LinearLayer,     // per-layer rows of a hybrid's linear-attention layers only
};

// How a tensor is handled beyond reading it by name and shape.
enum class Special : uint8_t {
  None,
  // llama.cpp stores the q/k rows (and biases) of llama-architecture models per head in the
  // interleaved RoPE order (llama_qk_gguf_row); the loaders put them back, the writer out.
  LlamaQkRows,
  // Only single rows are gathered from it (embeddings, codebooks), never the whole matrix per
  // step: loaders keep it in its stored dtype and do not pack it; the writer keeps 16 bits.
  Gathered,
  // Its Hugging Face name is relative to the text model's parent, not to the model prefix
  // (the LM head beside "model.").
  BesideTextModel,
};

// One row of a table, without the family's role.
struct TensorInfo {
  Scope scope = Scope::Model;
  const char* hf = nullptr;    // relative to the prefix, or to "<prefix>layers.{L}."; null: not in HF folders
  const char* gguf = nullptr;  // relative to "" or "blk.{L}."; null: not in GGUF files
  Shape shape;
  When when = When::Always;
  Special special = Special::None;
};

// A row with the field it fills, named by the family's own Role enum.
template <class Role>
struct TensorSpec : TensorInfo {
  Role role;
  TensorSpec(Role r, Scope s, const char* hf_name, const char* gguf_name, Shape sh, When w = When::Always,
             Special sp = Special::None)
      : TensorInfo{s, hf_name, gguf_name, sh, w, sp}, role(r) {}
  // Another family's row under this family's role (a tensor both have, named once).
  TensorSpec(Role r, const TensorInfo& same) : TensorInfo(same), role(r) {}
};

template <class Role>
using TensorTable = std::vector<TensorSpec<Role>>;

// The row for `role` (every role has exactly one).
template <class Role>
const TensorSpec<Role>& find_tensor(const TensorTable<Role>& table, Role role) {
  for (const auto& t : table)
    if (t.role == role) return t;
  throw std::logic_error("tensor table without the role asked for");
}

// Visits the rows in file order: the model rows before the per-layer block, the block once
// per layer (layer 0 first), then the model rows after it. Model rows get layer -1.
template <class Role, class Fn>
void for_each_tensor(const TensorTable<Role>& table, int n_layers, Fn&& fn) {
  size_t i = 0;
  for (; i < table.size() && table[i].scope == Scope::Model; ++i) fn(table[i], -1);
  const size_t block = i;
  while (i < table.size() && table[i].scope == Scope::PerLayer) ++i;
  for (int l = 0; l < n_layers; ++l)
    for (size_t j = block; j < i; ++j) fn(table[j], l);
  for (; i < table.size(); ++i) fn(table[i], -1);
}

// What decides the When of a tensor for one model.
struct TensorConditions {
  bool qk_norm = false, bias = false, tied = false;
  bool linear_layer = false;  // a hybrid's layer being read is linear attention
};
// Whether the tensor is there for a model with these conditions (IfStored: ask the checkpoint).
bool present(const TensorInfo& t, const TensorConditions& c);

enum class TensorFormat : uint8_t { HuggingFace, Gguf };

// How a table's relative names become a checkpoint's names.
struct TensorNaming {
  TensorFormat format = TensorFormat::HuggingFace;
  std::string prefix;               // before every Hugging Face name ("model.", ...)
  int64_t llama_qk_head_dim = 0;    // > 0: LlamaQkRows tensors are in llama.cpp's row order
};
inline TensorNaming hf_tensor_naming(std::string prefix = "") {
  return TensorNaming{TensorFormat::HuggingFace, std::move(prefix), 0};
}
inline TensorNaming gguf_tensor_naming(int64_t llama_qk_head_dim = 0) {
  return TensorNaming{TensorFormat::Gguf, "", llama_qk_head_dim};
}

// The checkpoint's name of a tensor (layer: -1 for model rows).
std::string tensor_name(const TensorInfo& t, const TensorNaming& naming, int layer = -1);
std::vector<int64_t> tensor_shape(const TensorInfo& t, const TensorDims& dims);

// A table's matrix (rank 2) in `type`, or as stored when the row is Gathered; in the
// reference row order whatever the file's.
WeightMatrix read_matrix(const TensorSource& src, const TensorInfo& t, const TensorNaming& naming,
                         const TensorDims& dims, std::optional<WType> type, int layer = -1);
// A table's vector (rank 1), in the reference order whatever the file's.
std::vector<float> read_vector(const TensorSource& src, const TensorInfo& t, const TensorNaming& naming,
                               const TensorDims& dims, int layer = -1);

}  // namespace dflash
