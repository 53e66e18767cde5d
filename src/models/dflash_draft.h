#pragma once
// A DFlash block-diffusion draft (z-lab format): Qwen3 decoder layers that read the target's
// hidden states as extra keys/values and predict a whole block of tokens in one pass. It has
// no embedding and no LM head of its own: the target's are used.
#include <memory>
#include <string>
#include <vector>

#include "models/drafter.h"
#include "models/kv_cache.h"
#include "models/transformer.h"

namespace dflash {

struct DraftConfig {
  int hidden = 0, n_layers = 0, n_heads = 0, n_kv_heads = 0, head_dim = 0, ffn = 0, vocab = 0;
  double rms_eps = 1e-6, rope_theta = 1e6;
  RopeScaling rope_scaling;
  int block_size = 16;
  int mask_token_id = -1;
  int num_target_layers = 0;
  std::vector<int> target_layer_ids;
  bool target_layers_from_formula = false;

  static DraftConfig from_json(const nlohmann::json& j, const std::string& origin, int target_layers);
};

// The tapped target layers when a config names none: the published formula, with Python's
// round-half-to-even.
std::vector<int> default_target_layer_ids(int n_target_layers, int n_draft_layers);

// How the draft rounds its activations. fp32 is the default and what the published drafts
// need; fp16 exists only to reproduce (and test the detection of) the overflow that made
// other engines silently accept nothing.
enum class DraftActivations { F32, F16 };

class DFlashDraft : public Drafter {
 public:
  // Loads and checks compatibility with `target` (hidden size, vocab, tapped ids, mask id).
  static std::unique_ptr<DFlashDraft> load(const std::string& dir, const LoadOptions& opt, const Transformer& target);

  const DraftConfig& config() const { return cfg_; }
  int block_size() const override { return cfg_.block_size; }
  const std::vector<int>& target_layers() const override { return cfg_.target_layer_ids; }
  int feature_dim() const override { return int(cfg_.target_layer_ids.size()) * cfg_.hidden; }
  KVCache make_cache(int capacity) const override;
  void set_activations(DraftActivations a) { act_ = a; }

  // Appends context rows (target taps, [n][feature_dim]) at positions cache.length()...
  void add_context(KVCache& cache, const float* features, int n, ThreadPool* pool) const override;
  // One block [first, MASK x (B-1)] at positions cache.length()..+B-1; writes the logits of
  // rows 1..B-1 ([B-1][vocab]) and leaves the cache holding only context rows.
  void propose(KVCache& cache, int32_t first, int B, float* logits, ThreadPool* pool) const override;

 private:
  DraftConfig cfg_;
  const Transformer* target_ = nullptr;
  WeightMatrix fc_;
  std::vector<float> hidden_norm_, norm_;
  std::vector<LayerWeights> layers_;
  std::vector<double> inv_freq_;
  std::shared_ptr<const void> storage_;
  DraftActivations act_ = DraftActivations::F32;
};

}  // namespace dflash
