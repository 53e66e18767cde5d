#pragma once
// The Qwen3.5 / Qwen3.6 hybrid family (../shared/qwen35-format.md): Gated DeltaNet
// linear-attention layers with a recurrent state and gated full-attention layers, zero-centered
// RMSNorms, partial NeoX RoPE. Its sequence state is a HybridState (KV cache for the attention
// layers, conv and recurrent states for the linear ones, rollback by replay).
// Single-flight: one forward at a time per instance (the activations are its own).
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "kernels/backend.h"
#include "kernels/weight_matrix.h"
#include "models/dense/decoder_blocks.h"
#include "models/model_config.h"
#include "models/qwen35/hybrid_state.h"
#include "models/qwen35/qwen35_tensors.h"
#include "models/batch_rows.h"
#include "models/target_model.h"

namespace dflash {

class Qwen35Model final : public TargetModel, private LinearReplay {
 public:
  // A Hugging Face folder (multimodal or text-only form, or an MLX conversion), or a
  // llama.cpp GGUF file of architecture qwen35.
  static std::unique_ptr<Qwen35Model> load(const std::string& path, LoadOptions opt);
  // Random weights of a given shape (benchmarks of real shapes without any file).
  static std::unique_ptr<Qwen35Model> random(const ModelConfig& cfg, WType weights, uint64_t seed,
                                              std::shared_ptr<Backend> backend = nullptr);

  const ModelConfig& config() const override { return cfg_; }
  const Backend& backend() const override { return *backend_; }
  std::unique_ptr<SequenceState> new_state(int capacity) const override;
  void set_cache_type(WType t) override;
  WType cache_type() const override { return cache_type_; }
  void forward_batch(std::span<SequenceRows> batch) const override;
  void embed(int32_t token, float* out) const override;
  void logits_from_hidden(const float* h, int rows, float* logits) const override;
  void lm_head_logits(const float* normed, int rows, float* logits) const override;
  size_t weight_bytes() const override;
  WType weight_type() const override { return lm_head_.type; }
  std::string family() const override { return "qwen35"; }

 private:
  void replay_linear(int li, const float* conv_old, const float* rec_old, const float* inputs, const float* b,
                     const float* a, int rows, float* conv_new, float* rec_new) const override;
  // Checks the loaded shapes against the config and builds the layer index maps.
  void finish_load();
  void attention_layer(const HybridLayer& w, int slot, std::span<SequenceRows> batch, int N) const;
  void linear_layer(const HybridLayer& w, int slot, std::span<SequenceRows> batch, int N) const;

  ModelConfig cfg_;
  std::shared_ptr<Backend> backend_;
  WeightMatrix embed_, lm_head_;
  std::vector<HybridLayer> layers_;
  std::vector<int> slot_;  // per layer: its index among the layers of its kind
  std::vector<int> linear_layer_ids_;
  std::vector<float> final_norm_;
  std::vector<double> inv_freq_;
  std::shared_ptr<const void> storage_;  // the mapped files, kept alive
  WType cache_type_ = WType::F32;
  // Activations, grown to the largest call's rows and reused (single-flight).
  struct Activations {
    ActivationBuffer x, h, p, q, gate, k, v, att, ffn_g, ffn_u, cos, sin, pos, kbeg, kend, m, c, z, b, a, y;
    ActivationBuffer pc, pb, pa;  // a sequence's pending rows and its own, together
  };
  mutable Activations act_;
  mutable ActivationBuffer normed_, replay_c_;
  mutable BatchLogitsBuffers logits_buf_;  // several sequences' logit rows, gathered (batch_rows.h)
  friend struct Qwen35Loader;
};

}  // namespace dflash
