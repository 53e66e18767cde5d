#pragma once
// The dense decoder family (Qwen3, Qwen2, Llama): every layer attention then a SwiGLU MLP;
// ArchSpec switches the per-family details (q/k norms, q/k/v biases). Its sequence state is a
// KVCache. Single-flight: one forward at a time per instance (the activations are its own).
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "kernels/backend.h"
#include "kernels/weight_matrix.h"
#include "models/dense/decoder_blocks.h"
#include "models/kv_cache.h"
#include "models/model_config.h"
#include "models/batch_rows.h"
#include "models/target_model.h"

namespace dflash {

class DenseModel final : public TargetModel {
 public:
  static std::unique_ptr<DenseModel> load(const std::string& dir, LoadOptions opt);
  // Random weights of a given shape (benchmarks of real shapes without any file).
  static std::unique_ptr<DenseModel> random(const ModelConfig& cfg, WType weights, uint64_t seed,
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
  std::string family() const override { return "dense"; }

 private:
  // Checks what the loaders filled (every layer attention) and sizes the RoPE table.
  void finish_load();
  ModelConfig cfg_;
  std::shared_ptr<Backend> backend_;
  WeightMatrix embed_, lm_head_;
  std::vector<LayerWeights> layers_;
  std::vector<float> final_norm_;
  std::vector<double> inv_freq_;
  std::shared_ptr<const void> storage_;  // the mapped files, kept alive
  WType cache_type_ = WType::F32;
  // Activations, grown to the largest call's rows and reused (single-flight).
  mutable DecoderActivations act_;
  mutable ActivationBuffer normed_;
  mutable BatchLogitsBuffers logits_buf_;  // several sequences' logit rows, gathered (batch_rows.h)
  friend struct DenseLoader;
  friend struct DenseGgufLoader;
};

}  // namespace dflash
