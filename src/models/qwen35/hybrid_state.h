#pragma once
// The sequence state of a Qwen3.5 hybrid (models/sequence_state.h): a KV cache for the
// full-attention layers and, per linear-attention layer, the conv state (the last K-1 pre-conv
// input rows) and the fp32 recurrent state [value_heads][key_dim][value_dim].
//
// Rolling back. Every linear layer keeps two copies of its states. A forward called with
// ForwardArgs::rollback_rows (a verify block) reads one copy and writes the other, so the copy
// it did not write still holds the state from before that forward; going back there is a
// swap. It also logs each row's pre-conv inputs and gate inputs (b, a); going back to any row
// inside the block replays the kept rows from the old copy with the same kernels, so the
// state equals plain decoding's bit for bit. Other forwards update the current copy in place. A replay costs the
// recurrence of the kept rows (no projections), and nothing is copied per verified row: a
// 27B-class state is 150 MB, a per-row snapshot of it per draft position would be that much
// per row (../shared/qwen35-format.md §6). One more copy, the checkpoint, is kept where the
// generator asks (the end of a prompt), for a follow-up request's prefix reuse.
#include <cstddef>
#include <cstdint>
#include <memory>
#include <vector>

#include "kernels/backend.h"
#include "models/kv_cache.h"
#include "models/model_config.h"
#include "models/sequence_state.h"

namespace dflash {

// What a state needs from its model to replay logged rows of linear layer li: the
// convolution of `rows` logged inputs after `conv_old`, then the recurrence from `rec_old`,
// writing the states after them (no readout). The model implements it with the same kernels
// as its forward, so a replayed state is bitwise the state a forward would have left.
class LinearReplay {
 public:
  virtual ~LinearReplay() = default;
  virtual void replay_linear(int li, const float* conv_old, const float* rec_old, const float* inputs, const float* b,
                             const float* a, int rows, float* conv_new, float* rec_new) const = 0;
};

class HybridState final : public SequenceState {
 public:
  // For a model of config `c` (its layer_kinds and linear shape), KV rows in `kv_type`.
  HybridState(const ModelConfig& c, int capacity, WType kv_type, const Backend& backend, const LinearReplay& model);

  int length() const override { return length_; }
  int capacity() const override { return kv_.capacity(); }
  int rollback_point(int n) const override;
  void rollback(int n) override;
  size_t bytes() const override;
  bool wants_checkpoints() const override { return true; }
  // One copy of every linear layer's states at the current length.
  void keep_checkpoint() override;

  // --- For the model's forward ---
  KVCache& kv() { return kv_; }
  // The states a forward of linear layer li reads (before its rows) and writes (after them):
  // the other copy when the forward may be rolled back (keep_old), else the same one (in
  // place: a decode step then reads and writes each state line once, not twice).
  const float* conv_in(int li) const { return layers_[size_t(li)].conv[cur_]; }
  float* conv_out(int li, bool keep_old) { return layers_[size_t(li)].conv[keep_old ? cur_ ^ 1 : cur_]; }
  const float* rec_in(int li) const { return layers_[size_t(li)].rec[cur_]; }
  float* rec_out(int li, bool keep_old) { return layers_[size_t(li)].rec[keep_old ? cur_ ^ 1 : cur_]; }
  // A forward of n rows that may be rolled back into (rollback_rows) logs them here:
  // begin_log(n) first, then per linear layer its pre-conv inputs [n][channels] and gate
  // inputs b, a [n][value_heads].
  void begin_log(int n);
  float* log_inputs(int li) { return log_ptr(li, 0); }
  float* log_b(int li) { return log_ptr(li, 1); }
  float* log_a(int li) { return log_ptr(li, 2); }
  // After a forward of n rows: with keep_old (rollback_rows) the written copies become
  // current and the old ones, with the log, reach back into the block; without, the state was
  // updated in place and only its new length and the checkpoint are reachable.
  void commit(int n, bool keep_old);

 private:
  struct Linear {
    float* conv[2];
    float* rec[2];
  };
  float* log_ptr(int li, int part);
  size_t log_row_floats() const;
  void clear();
  ModelConfig::LinearAttention shape_;
  const Backend& be_;
  const LinearReplay& model_;
  KVCache kv_;
  std::shared_ptr<uint8_t> memory_;
  std::vector<Linear> layers_;
  size_t conv_floats_ = 0, rec_floats_ = 0;
  int length_ = 0;
  int cur_ = 0;
  int from_ = -1;     // the other copies hold the state at this length; -1: none
  int logged_ = 0;    // rows of the forward from from_ that the log holds (0: none)
  int log_cap_ = 0;   // rows the log memory has room for
  std::shared_ptr<uint8_t> log_;
  int ckpt_len_ = -1;  // the checkpoint's length; -1: none
  std::shared_ptr<uint8_t> ckpt_;  // [linear layer][rec | conv]
};

}  // namespace dflash
