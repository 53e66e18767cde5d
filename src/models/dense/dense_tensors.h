#pragma once
// The tensors of a dense decoder-only target (Qwen3, Qwen2, Llama), in the order llama.cpp
// writes them, and the one loop that fills a LayerWeights from them. The per-layer rows are
// also the DFlash drafts' layers (Qwen3 layers: q/k norms, no biases).
#include <optional>
#include <string>
#include <vector>

#include "models/model_config.h"
#include "models/tensor_table.h"
#include "models/dense/dense_model.h"
#include "util/error.h"

namespace dflash {

class WeightLoader;

enum class DenseRole : uint8_t {
  Embed, RopeFreqs,
  AttnNorm, Wq, Wk, Wv, Bq, Bk, Bv, QNorm, KNorm, Wo, FfnNorm, Gate, Up, Down,  // LayerWeights
  FinalNorm, LmHead,
};

const TensorTable<DenseRole>& dense_tensors();
inline const TensorSpec<DenseRole>& dense_tensor(DenseRole r) { return find_tensor(dense_tensors(), r); }

// The sizes of one decoder layer (Hidden, QDim, KvDim, HeadDim, HalfHeadDim, Ffn).
TensorDims decoder_layer_dims(int64_t hidden, int n_heads, int n_kv_heads, int head_dim, int64_t ffn);
// Those plus Vocab.
TensorDims dense_dims(const ModelConfig& c);
TensorConditions dense_conditions(const ModelConfig& c);
// GGUF names of `c`'s architecture (llama stores q/k rows in llama.cpp's order).
TensorNaming dense_gguf_naming(const ModelConfig& c);

// One decoder layer from the table's per-layer rows, prepared for the backend's kernels as it
// is read (so a mapped file's pages are released layer by layer).
LayerWeights read_layer(const Backend& be, const TensorSource& src, const TensorNaming& naming, int layer, const TensorDims& dims,
                        const TensorConditions& when, std::optional<WType> type);

// Where a target's weights go: the DenseModel's own fields (its loaders are its friends).
struct DenseFields {
  WeightMatrix& embed;
  std::vector<LayerWeights>& layers;
  std::vector<float>& final_norm;
};
// Everything but the LM head, whose lookup and tie rules differ between the formats.
void read_dense_body(const Backend& be, const TensorSource& src, const TensorNaming& naming, const ModelConfig& c,
                     std::optional<WType> type, DenseFields out);

// A tied LM head: the embedding, streamed whole per step, so read in `type` (not Gathered).
WeightMatrix read_embedding_as_head(const TensorSource& src, const TensorNaming& naming, const ModelConfig& c,
                                    std::optional<WType> type);

// A Hugging Face checkpoint's untied LM head: beside the text model (`model_prefix` less its
// trailing "model.") or at the top level; "" when neither has one.
std::string find_hf_lm_head(const WeightLoader& L, const std::string& model_prefix);
// The error for a checkpoint without a head that it does not tie to the embedding.
Error missing_lm_head(const std::string& dir);

}  // namespace dflash
