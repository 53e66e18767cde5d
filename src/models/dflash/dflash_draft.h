#pragma once
// A DFlash block-diffusion draft (z-lab format): Qwen3 decoder layers that read the target's
// hidden states as extra keys/values and predict a whole block of tokens in one pass. It has
// no embedding and no LM head of its own: the target's are used.
#include <memory>
#include <string>
#include <vector>

#include "models/drafter.h"
#include "models/kv_cache.h"
#include "models/target_model.h"
#include "models/dense/dense_model.h"
#include "models/weight_loader.h"

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

  // Attention per draft layer: attend to keys within `window` positions (0: all) and, when
  // causal, to none after the row's own. v1 drafts leave both at their defaults.
  std::vector<int> window;
  std::vector<char> causal;
  float embed_scale = 1.0f;  // multiplies the embedded block rows

  // `architecture`: the one the caller expects ("DFlashDraftModel" or "DFlash2DraftModel").
  static DraftConfig from_json(const nlohmann::json& j, const std::string& origin, int target_layers,
                               const std::string& architecture = "DFlashDraftModel");
};

// The draft's architecture named in config.json ("" when there is none).
std::string draft_architecture(const nlohmann::json& j);
// A DFlash key, top level or inside dflash_config (that one wins); null when absent.
const nlohmann::json* dflash_key(const nlohmann::json& j, const char* k);

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
  // A DFlash2DraftModel folder comes back as a DFlash2Draft; a path ending in .gguf is read
  // as llama.cpp's `dflash` GGUF (load_gguf).
  static std::unique_ptr<DFlashDraft> load(const std::string& dir, const LoadOptions& opt, const TargetModel& target);
  // A draft converted by llama.cpp's convert_hf_to_gguf.py (architecture "dflash").
  static std::unique_ptr<DFlashDraft> load_gguf(const std::string& path, const LoadOptions& opt,
                                                const TargetModel& target);
  // Random weights of a given shape for `target` (speed benchmarks of real shapes, nothing on
  // disk): vocab, mask id and the tapped ids come from cfg as given; cfg must fit the target.
  static std::unique_ptr<DFlashDraft> random(const DraftConfig& cfg, WType weights, const TargetModel& target,
                                             uint64_t seed);
  virtual const char* kind() const { return "dflash"; }

  const DraftConfig& config() const { return cfg_; }
  int block_size() const override { return cfg_.block_size; }
  const std::vector<int>& target_layers() const override { return cfg_.target_layer_ids; }
  int feature_dim() const override { return int(cfg_.target_layer_ids.size()) * cfg_.hidden; }
  std::unique_ptr<SequenceState> new_state(int capacity) const override;
  void set_activations(DraftActivations a) { act_ = a; }
  // The draft's own cache format; f32 by default, as a quantized draft cache is known to
  // collapse acceptance in other engines.
  void set_cache_type(WType t);
  WType cache_type() const { return cache_type_; }

  // Appends context rows (target taps, [n][feature_dim]) at positions cache.length()...
  void add_context(SequenceState& state, const float* features, int n) const override;
  // One block [first, MASK x (B-1)] at positions cache.length()..+B-1; writes the logits of
  // rows 1..B-1 ([B-1][vocab]) and leaves the cache holding only context rows.
  void propose(SequenceState& state, int32_t first, int B, float* logits) const override;
  // Every job's context rows in one pass, then every job's block in one pass, then one pass
  // of the target's head over all their rows (Drafter::draft_batch).
  void draft_batch(const std::vector<DraftJob*>& jobs) const override;
  size_t context_row_bytes() const override;

 protected:
  // A job's rows inside a stacked pass: rows off..off+n-1.
  struct Segment {
    int off, n;
  };
  // Checks cfg_ against the target, maps the folder, loads the tensors v1 and v2 share;
  // returns the loader (valid while storage_ lives) for the rest.
  WeightLoader load_common(const std::string& dir, const std::string& cfg_path, const LoadOptions& opt,
                           const TargetModel& target);
  // The compatibility checks of load_common (errors name `origin`); sets cfg_.vocab.
  void check_fits(const std::string& origin, const TargetModel& target);
  // After the weights: the RoPE frequencies and the target whose embedding and head are used.
  void finish_load(const TargetModel& target);
  std::vector<std::string> store_names() const;  // the checkpoint's tensor names
  // The block through every layer; writes norm(h) of rows 1..B-1 ([B-1][hidden]) and drops
  // the block's K/V from the cache.
  void block_hidden(SequenceState& state, int32_t first, int B, float* normed) const;
  // The same for several jobs' blocks stacked in one pass (each attends to its own cache);
  // normed holds each job's B-1 rows in job order.
  void blocks_hidden(const std::vector<DraftJob*>& jobs, float* normed) const;
  // Several jobs' context rows stacked in one pass (jobs without context rows are skipped).
  void context_rows(const std::vector<DraftJob*>& jobs) const;
  // Context, blocks and the target's head for every job (timed: context_s, block_s by rows);
  // returns the logits of all rows 1..B-1, job after job, and their normed hidden states.
  const float* batch_logits(const std::vector<DraftJob*>& jobs, const float** normed) const;
  // Hooks around each sublayer (sub 0 attention, 1 MLP) of layer l: `h` is the normed
  // sublayer input of every stacked block (`blocks` says whose rows are where) and may be
  // rewritten, `o` the sublayer output. No-ops in v1.
  virtual void sublayer_in(int /*l*/, int /*sub*/, float* /*h*/, const std::vector<Segment>& /*blocks*/) const {}
  virtual void sublayer_out(int /*l*/, int /*sub*/, float* /*o*/, const std::vector<Segment>& /*blocks*/) const {}
  // The draft's KV cache behind a state from new_state (throws for any other state).
  static KVCache& cache_of(SequenceState& state);

  DraftConfig cfg_;
  std::string prefix_;  // tensor name prefix ("" or "model.")
  const TargetModel* target_ = nullptr;
  const Backend* backend_ = nullptr;  // the target's
  WeightMatrix fc_;
  std::vector<float> hidden_norm_, norm_;
  std::vector<LayerWeights> layers_;
  std::vector<double> inv_freq_;
  std::shared_ptr<const void> storage_;
  DraftActivations act_ = DraftActivations::F32;
  WType cache_type_ = WType::F32;
  // Activations, grown to the largest call and reused (single-flight, like the target).
  struct Activations {
    DecoderActivations layers;
    ActivationBuffer normed, logits, ctx, features;
  };
  mutable Activations acts_;
};

}  // namespace dflash
