#include "models/qwen35/hybrid_state.h"

#include <algorithm>
#include <cstring>

#include "util/error.h"

namespace dflash {

namespace {
int count_kind(const ModelConfig& c, LayerKind k) {
  int n = 0;
  for (LayerKind x : c.layer_kinds) n += x == k;
  return n;
}
}  // namespace

HybridState::HybridState(const ModelConfig& c, int capacity, WType kv_type, const Backend& backend,
                         const LinearReplay& model)
    : shape_(c.linear), be_(backend), model_(model),
      kv_(count_kind(c, LayerKind::Attention), c.n_kv_heads, c.head_dim, capacity, kv_type, &backend) {
  const int n_lin = count_kind(c, LayerKind::LinearAttention);
  conv_floats_ = size_t(shape_.conv_kernel - 1) * size_t(shape_.channels());
  rec_floats_ = size_t(shape_.value_heads) * size_t(shape_.key_dim) * size_t(shape_.value_dim);
  // Both copies of every layer's states in one block (zero-filled: the state at length 0).
  memory_ = backend.allocate(2 * size_t(n_lin) * (conv_floats_ + rec_floats_) * sizeof(float));
  float* p = reinterpret_cast<float*>(memory_.get());
  for (int l = 0; l < n_lin; ++l) {
    Linear L{};
    for (int k = 0; k < 2; ++k) {
      L.rec[k] = p;
      p += rec_floats_;
      L.conv[k] = p;
      p += conv_floats_;
    }
    layers_.push_back(L);
  }
}

size_t HybridState::bytes() const {
  const size_t states = 2 * layers_.size() * (conv_floats_ + rec_floats_) * sizeof(float);
  const size_t log = log_ ? size_t(log_cap_) * log_row_floats() * layers_.size() * sizeof(float) : 0;
  const size_t ckpt = ckpt_ ? layers_.size() * (conv_floats_ + rec_floats_) * sizeof(float) : 0;
  return kv_.bytes() + states + log + ckpt;
}

size_t HybridState::log_row_floats() const { return size_t(shape_.channels()) + 2 * size_t(shape_.value_heads); }

float* HybridState::log_ptr(int li, int part) {
  float* base = reinterpret_cast<float*>(log_.get()) + size_t(li) * size_t(log_cap_) * log_row_floats();
  const size_t C = size_t(shape_.channels()), nv = size_t(shape_.value_heads);
  return base + (part == 0 ? 0 : part == 1 ? size_t(log_cap_) * C : size_t(log_cap_) * (C + nv));
}

void HybridState::begin_log(int n) {
  if (n > log_cap_) {
    log_ = be_.allocate(size_t(n) * log_row_floats() * layers_.size() * sizeof(float));
    log_cap_ = n;
  }
}

void HybridState::commit(int n, bool keep_old) {
  if (keep_old) {
    from_ = length_;
    logged_ = n;
    cur_ ^= 1;
  } else {
    from_ = -1;  // updated in place: nothing before this forward is left but the checkpoint
    logged_ = 0;
  }
  length_ += n;
  kv_.set_length(length_);
}

void HybridState::keep_checkpoint() {
  const size_t per_layer = conv_floats_ + rec_floats_;
  if (!ckpt_) ckpt_ = be_.allocate(layers_.size() * per_layer * sizeof(float));
  float* p = reinterpret_cast<float*>(ckpt_.get());
  for (const Linear& L : layers_) {
    std::memcpy(p, L.rec[cur_], rec_floats_ * sizeof(float));
    std::memcpy(p + rec_floats_, L.conv[cur_], conv_floats_ * sizeof(float));
    p += per_layer;
  }
  ckpt_len_ = length_;
}

int HybridState::rollback_point(int n) const {
  if (n >= length_) return length_;
  if (n <= 0) return 0;
  int best = 0;  // start over
  // The copies from before the last forward, and the rows of its log after them.
  if (from_ >= 0 && n >= from_) best = std::min(n, from_ + std::max(logged_ - 1, 0));
  if (ckpt_len_ >= 0 && ckpt_len_ <= n) best = std::max(best, ckpt_len_);
  return best;
}

void HybridState::clear() {
  for (Linear& L : layers_) {
    std::memset(L.conv[cur_], 0, conv_floats_ * sizeof(float));
    std::memset(L.rec[cur_], 0, rec_floats_ * sizeof(float));
  }
  length_ = 0;
  from_ = -1;
  logged_ = 0;
  ckpt_len_ = -1;
  kv_.set_length(0);
}

void HybridState::rollback(int n) {
  if (n >= length_) return;
  if (rollback_point(n) != n) throw Error("hybrid state: cannot roll back to " + std::to_string(n));
  if (n <= 0) return clear();
  const int old = cur_ ^ 1;
  const bool by_log = from_ >= 0 && n >= from_ && n - from_ < std::max(logged_, 1);
  if (!by_log) {
    // The checkpoint (rollback_point said it is n): copied back into the current states.
    const float* p = reinterpret_cast<const float*>(ckpt_.get());
    for (Linear& L : layers_) {
      std::memcpy(L.rec[cur_], p, rec_floats_ * sizeof(float));
      std::memcpy(L.conv[cur_], p + rec_floats_, conv_floats_ * sizeof(float));
      p += conv_floats_ + rec_floats_;
    }
    from_ = -1;
    logged_ = 0;
  } else if (n == from_) {
    cur_ = old;  // the copies from before the last forward
    from_ = -1;
    logged_ = 0;
  } else {
    // Replay the first j logged rows from the old copies into the current ones. The old
    // copies and the log stay, so a later rollback to a row between from_ and n still works.
    const int j = n - from_;
    for (size_t li = 0; li < layers_.size(); ++li) {
      Linear& L = layers_[li];
      model_.replay_linear(int(li), L.conv[old], L.rec[old], log_inputs(int(li)), log_b(int(li)), log_a(int(li)), j,
                           L.conv[cur_], L.rec[cur_]);
    }
  }
  if (ckpt_len_ > n) ckpt_len_ = -1;  // its KV rows will be overwritten
  length_ = n;
  kv_.set_length(n);
}

}  // namespace dflash
