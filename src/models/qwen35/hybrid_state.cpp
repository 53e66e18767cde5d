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
  // Every layer's states in one block (zero-filled: the state at length 0).
  memory_ = backend.allocate(size_t(n_lin) * (conv_floats_ + rec_floats_) * sizeof(float));
  float* p = reinterpret_cast<float*>(memory_.get());
  for (int l = 0; l < n_lin; ++l) {
    layers_.push_back(Linear{p + rec_floats_, p});
    p += rec_floats_ + conv_floats_;
  }
}

size_t HybridState::bytes() const {
  const size_t states = layers_.size() * (conv_floats_ + rec_floats_) * sizeof(float);
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
  if (n <= log_cap_) return;
  // A larger log; the pending rows move over (the forward reads them before it logs its own).
  std::shared_ptr<uint8_t> old = std::move(log_);
  const int old_cap = log_cap_, keep = pending();
  log_ = be_.allocate(size_t(n) * log_row_floats() * layers_.size() * sizeof(float));
  log_cap_ = n;
  if (keep == 0 || !old) return;
  const size_t C = size_t(shape_.channels()), nv = size_t(shape_.value_heads);
  const size_t widths[3] = {C, nv, nv};
  for (size_t li = 0; li < layers_.size(); ++li) {
    const float* src = reinterpret_cast<const float*>(old.get()) + li * size_t(old_cap) * log_row_floats();
    for (int part = 0; part < 3; ++part) {
      std::memcpy(log_ptr(int(li), part), src, sizeof(float) * widths[part] * size_t(keep));
      src += size_t(old_cap) * widths[part];
    }
  }
}

void HybridState::commit(int n, bool logged) {
  if (logged) {
    from_ = length_;  // the forward left the base at its first row and logged its rows
    logged_ = n;
  } else {
    from_ = length_ + n;  // updated to its end: nothing before it is left but the checkpoint
    logged_ = 0;
  }
  length_ += n;
  kv_.set_length(length_);
}

void HybridState::keep_checkpoint() {
  const size_t per_layer = conv_floats_ + rec_floats_;
  if (!ckpt_) ckpt_ = be_.allocate(layers_.size() * per_layer * sizeof(float));
  float* p = reinterpret_cast<float*>(ckpt_.get());
  const int j = pending();
  for (size_t li = 0; li < layers_.size(); ++li, p += per_layer) {
    const Linear& L = layers_[li];
    if (j > 0) {
      // The base plus the pending rows, replayed into the checkpoint (the base stays).
      model_.replay_linear(int(li), L.conv, L.rec, log_inputs(int(li)), log_b(int(li)), log_a(int(li)), j,
                           p + rec_floats_, p);
    } else {
      std::memcpy(p, L.rec, rec_floats_ * sizeof(float));
      std::memcpy(p + rec_floats_, L.conv, conv_floats_ * sizeof(float));
    }
  }
  ckpt_len_ = length_;
}

int HybridState::rollback_point(int n) const {
  if (n >= length_) return length_;
  if (n <= 0) return 0;
  int best = 0;                  // start over
  if (n >= from_) best = n;      // the base and the log's rows after it
  if (ckpt_len_ >= 0 && ckpt_len_ <= n) best = std::max(best, ckpt_len_);
  return best;
}

void HybridState::clear() {
  for (Linear& L : layers_) {
    std::memset(L.conv, 0, conv_floats_ * sizeof(float));
    std::memset(L.rec, 0, rec_floats_ * sizeof(float));
  }
  length_ = 0;
  from_ = 0;
  logged_ = 0;
  ckpt_len_ = -1;
  kv_.set_length(0);
}

void HybridState::rollback(int n) {
  if (n >= length_) return;
  if (rollback_point(n) != n) throw Error("hybrid state: cannot roll back to " + std::to_string(n));
  if (n <= 0) return clear();
  if (n < from_) {
    // The checkpoint (rollback_point said it is n): copied back into the base.
    const float* p = reinterpret_cast<const float*>(ckpt_.get());
    for (Linear& L : layers_) {
      std::memcpy(L.rec, p, rec_floats_ * sizeof(float));
      std::memcpy(L.conv, p + rec_floats_, conv_floats_ * sizeof(float));
      p += conv_floats_ + rec_floats_;
    }
    from_ = n;
    logged_ = 0;
  }
  // Inside the block: fewer pending rows; the next forward runs them. The log stays, so a
  // later rollback to a row between from_ and n still works.
  if (ckpt_len_ > n) ckpt_len_ = -1;  // its KV rows will be overwritten
  length_ = n;
  kv_.set_length(n);
}

// Snapshots: the checkpoint (where a chat's next turn parts from this one), else the base
// states when no rows are pending past them. States are copied as [linear layer][rec | conv],
// the checkpoint's own order.
int HybridState::snapshot_point() const {
  if (ckpt_len_ > 0) return ckpt_len_;
  return from_;
}

std::unique_ptr<StateSnapshot> HybridState::snapshot(int n) const {
  if (n <= 0 || n > length_) return nullptr;
  const size_t per_layer = conv_floats_ + rec_floats_;
  auto s = std::make_unique<StateSnapshot>();
  s->layout = "hybrid:" + std::to_string(layers_.size()) + "x" + std::to_string(per_layer) + "+" + kv_.layout();
  s->length = n;
  s->recurrent.resize(layers_.size() * per_layer);
  float* p = s->recurrent.data();
  if (n == ckpt_len_) {
    std::memcpy(p, ckpt_.get(), s->recurrent.size() * sizeof(float));
  } else if (n == from_) {
    for (const Linear& L : layers_) {
      std::memcpy(p, L.rec, rec_floats_ * sizeof(float));
      std::memcpy(p + rec_floats_, L.conv, conv_floats_ * sizeof(float));
      p += per_layer;
    }
  } else {
    return nullptr;  // no copy of the states at n
  }
  kv_.copy_rows_out(n, s->kv);
  return s;
}

bool HybridState::restore(const StateSnapshot& s) {
  const size_t per_layer = conv_floats_ + rec_floats_;
  const std::string layout = "hybrid:" + std::to_string(layers_.size()) + "x" + std::to_string(per_layer) + "+" + kv_.layout();
  if (s.layout != layout || s.length <= 0 || s.length > kv_.capacity() || s.recurrent.size() != layers_.size() * per_layer ||
      s.kv.size() != kv_.rows_bytes(s.length))
    return false;
  const float* p = s.recurrent.data();
  for (Linear& L : layers_) {
    std::memcpy(L.rec, p, rec_floats_ * sizeof(float));
    std::memcpy(L.conv, p + rec_floats_, conv_floats_ * sizeof(float));
    p += per_layer;
  }
  kv_.copy_rows_in(s.length, s.kv.data());
  length_ = from_ = s.length;
  logged_ = 0;
  kv_.set_length(length_);
  keep_checkpoint();  // so that rollback_point(length) stays reachable after a longer forward
  return true;
}

}  // namespace dflash
