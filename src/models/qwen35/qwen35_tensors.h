#pragma once
// The tensors of a Qwen3.5 hybrid text stack (../shared/qwen35-format.md §2), Hugging Face and
// GGUF names side by side, in llama.cpp's order, and the loop that fills one layer from them.
// Rows marked AttentionLayer / LinearLayer exist only in layers of that kind.
#include <optional>
#include <string>
#include <vector>

#include "kernels/backend.h"
#include "models/dense/decoder_blocks.h"
#include "models/model_config.h"
#include "models/qwen35/qwen35_head_order.h"
#include "models/tensor_table.h"

namespace dflash {

enum class Qwen35Role : uint8_t {
  Embed,
  InNorm, Wq, Wk, Wv, QNorm, KNorm, Wo,                                   // gated attention
  InQkv, InZ, InB, InA, Conv, ALog, DtBias, SsmNorm, OutProj,             // Gated DeltaNet
  PostNorm, Gate, Up, Down,                                                // every layer
  FinalNorm, LmHead,
};

const TensorTable<Qwen35Role>& qwen35_tensors();
inline const TensorSpec<Qwen35Role>& qwen35_tensor(Qwen35Role r) { return find_tensor(qwen35_tensors(), r); }
TensorDims qwen35_dims(const ModelConfig& c);

// One hybrid layer. Attention layers use mlp's wq (query and gate rows interleaved per head,
// as stored), wk, wv, wo, q_norm, k_norm; every layer its attn_norm (input), ffn_norm
// (post-attention), gate, up, down. The zero-centered norms hold 1 + w.
struct HybridLayer {
  LayerKind kind = LayerKind::Attention;
  LayerWeights mlp;
  WeightMatrix in_qkv, in_z, in_b, in_a, out_proj;
  std::vector<float> conv;     // [channels][kernel]
  std::vector<float> neg_a;    // [value_heads]: -exp(A_log)
  std::vector<float> dt_bias;  // [value_heads]
  std::vector<float> ssm_norm; // [value_dim], plain weight
};

// How a checkpoint stores what the format transforms (§2.1, §2.5).
struct Qwen35Storage {
  bool norms_plus_one = false;  // zero-centered norms already hold 1 + w (MLX, GGUF)
  bool stores_neg_a = false;    // ssm_a = -exp(A_log) instead of A_log (GGUF)
  int tiled_key_heads = 0;      // > 0: value heads in GGUF's tiled order over this many key heads
};

// Reads layer `layer` of kind `kind` and prepares its matrices for the backend. A linear layer
// stored in Qwen3-Next's fused form (in_proj_qkvz, in_proj_ba) is split into in_qkv, in_z,
// in_b and in_a here (qwen35_fused.h).
HybridLayer read_hybrid_layer(const Backend& be, const TensorSource& src, const TensorNaming& naming, int layer,
                              LayerKind kind, const TensorDims& dims, const Qwen35Storage& storage,
                              std::optional<WType> type);

// Puts a linear layer's value heads (in_qkv's v rows, in_z, in_b, in_a rows, out_proj columns,
// the conv's v channels, neg_a, dt_bias) in order `to`, from the other order, with nk key
// heads. type: the matrices' new format (nullopt: each keeps its own).
void reorder_layer_v_heads(HybridLayer& w, int key_heads, const TensorDims& dims, VHeadOrder to,
                           std::optional<WType> type = std::nullopt);

// A zero-centered norm's weight as the kernels use it (1 + w, unless already stored so).
std::vector<float> centered_norm(std::vector<float> w, const Qwen35Storage& storage);

}  // namespace dflash
