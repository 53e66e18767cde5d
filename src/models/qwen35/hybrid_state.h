#pragma once
// The sequence state of a Qwen3.5 hybrid (models/sequence_state.h): a KV cache for the
// full-attention layers and, per linear-attention layer, the conv state (the last K-1 pre-conv
// input rows) and the fp32 recurrent state [value_heads][key_dim][value_dim].
//
// Rolling back. Each linear layer keeps one copy of its states, the base, at length from_;
// the rows of the last verify block (ForwardArgs::rollback_rows) are logged (pre-conv inputs
// and gate inputs b, a) and the forward leaves the base at the block's start. Rolling back to
// any row inside the block, or accepting all of it, costs nothing then: it only sets the
// length, and the rows between the base and the length are "pending". The next forward runs
// the pending rows first, without a readout, in the same kernel calls as its own rows
// (kernels/gated_delta.h, quiet rows), while each head's state is in cache: a verify step
// reads and writes each state once, as a plain step does, and a rollback costs only the
// recurrence of the kept rows. The replayed rows are the same kernels on the same inputs, so
// the state equals plain decoding's bit for bit. Nothing is copied per verified row: a
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
// as its forward, so a replayed state is bitwise the state a forward would have left. Used
// where a state must exist outside a forward: the checkpoint.
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
  int snapshot_point() const override;
  std::unique_ptr<StateSnapshot> snapshot(int n) const override;
  bool restore(const StateSnapshot& s) override;

  // --- For the model's forward ---
  KVCache& kv() { return kv_; }
  // Linear layer li's base states (at length from_): the conv state (the last K-1 pre-conv
  // rows) and the recurrent state.
  float* conv(int li) { return layers_[size_t(li)].conv; }
  float* rec(int li) { return layers_[size_t(li)].rec; }
  // Rows of the log a forward runs before its own (length - from_), and their inputs:
  // pre-conv [rows][channels], gate inputs b and a [rows][value_heads].
  int pending() const { return length_ - from_; }
  // A verify forward of n rows logs them here (begin_log(n) first, keeping pending rows),
  // after taking the pending rows out.
  void begin_log(int n);
  float* log_inputs(int li) { return log_ptr(li, 0); }
  float* log_b(int li) { return log_ptr(li, 1); }
  float* log_a(int li) { return log_ptr(li, 2); }
  // After a forward of n rows that ran the pending rows first: a verify (logged) left the
  // base at its first row, any other forward at its end.
  void commit(int n, bool logged);

 private:
  struct Linear {
    float* conv;
    float* rec;
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
  int from_ = 0;      // the base states' length; from_ <= length_ <= from_ + logged_
  int logged_ = 0;    // rows of the log (the last verify block, from from_)
  int log_cap_ = 0;   // rows the log memory has room for
  std::shared_ptr<uint8_t> log_;
  int ckpt_len_ = -1;  // the checkpoint's length; -1: none
  std::shared_ptr<uint8_t> ckpt_;  // [linear layer][rec | conv]
};

}  // namespace dflash
