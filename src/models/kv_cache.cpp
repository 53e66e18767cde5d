#include "models/kv_cache.h"

#include <cstring>

#include "util/error.h"
#include "util/mapped_file.h"

namespace dflash {

bool kv_type_supported(WType t) {
  return t == WType::F32 || t == WType::F16 || t == WType::Q8_0 || t == WType::Q4_0;
}

WType parse_kv_type(const std::string& s) {
  if (s == "f32") return WType::F32;
  if (s == "f16") return WType::F16;
  if (s == "q8" || s == "q8_0") return WType::Q8_0;
  if (s == "q4" || s == "q4_0") return WType::Q4_0;
  throw Error("unknown KV cache type '" + s + "' (expected f32, f16, q8 or q4)");
}

void check_kv_type(WType type, int head_dim) {
  if (!kv_type_supported(type)) throw Error(std::string("KV cache type ") + wtype_name(type) + " is not supported");
  if ((type == WType::Q8_0 || type == WType::Q4_0) && head_dim % kQBlock != 0)
    throw Error("a " + std::string(wtype_name(type)) + " KV cache needs head_dim to be a multiple of 32 (it is " +
                std::to_string(head_dim) + ")");
}

KVCache::KVCache(int n_layers, int n_kv_heads, int head_dim, int capacity, WType type, const Backend* backend)
    : n_layers_(n_layers), n_kv_heads_(n_kv_heads), head_dim_(head_dim), capacity_(capacity), type_(type) {
  check_kv_type(type, head_dim);
  row_bytes_ = dflash::row_bytes(type, head_dim);
  // Pages, not a vector: they are mapped as the context fills (not zeroed up front), and a
  // large cache is read as huge pages (see alloc_pages).
  bytes_ = size_t(n_layers) * layer_bytes();
  k_ = backend ? backend->allocate(bytes_) : alloc_pages(bytes_);
  v_ = backend ? backend->allocate(bytes_) : alloc_pages(bytes_);
}

void KVCache::store(int layer, const float* k, const float* v, int pos0, int n) {
  const int hd = head_dim_, kvd = n_kv_heads_ * hd;
  uint8_t* kc = this->k(layer);
  uint8_t* vc = this->v(layer);
  for (int i = 0; i < n; ++i)
    for (int kh = 0; kh < n_kv_heads_; ++kh) {
      const size_t dst = (size_t(kh) * size_t(capacity_) + size_t(pos0 + i)) * row_bytes_;
      const size_t src = size_t(i) * kvd + size_t(kh) * hd;
      // Each row is quantized on its own, so a row's bytes do not depend on the call's batch.
      quantize_row(k + src, hd, type_, kc + dst);
      quantize_row(v + src, hd, type_, vc + dst);
    }
}

void KVCache::bind(int layer, AttentionArgs& a) const {
  a.k_cache = k(layer);
  a.v_cache = v(layer);
  a.capacity = capacity_;
  a.kv_type = type_;
}

std::string KVCache::layout() const {
  return "kv:" + std::to_string(n_layers_) + "x" + std::to_string(n_kv_heads_) + "x" + std::to_string(head_dim_) + ":" +
         wtype_name(type_);
}

void KVCache::copy_rows_out(int n, std::vector<uint8_t>& out) const {
  const size_t run = size_t(n) * row_bytes_;
  out.resize(rows_bytes(n));
  uint8_t* o = out.data();
  for (int l = 0; l < n_layers_; ++l)
    for (const uint8_t* base : {k(l), v(l)})
      for (int h = 0; h < n_kv_heads_; ++h, o += run) std::memcpy(o, base + size_t(h) * size_t(capacity_) * row_bytes_, run);
}

void KVCache::copy_rows_in(int n, const uint8_t* in) {
  const size_t run = size_t(n) * row_bytes_;
  for (int l = 0; l < n_layers_; ++l)
    for (uint8_t* base : {k(l), v(l)})
      for (int h = 0; h < n_kv_heads_; ++h, in += run) std::memcpy(base + size_t(h) * size_t(capacity_) * row_bytes_, in, run);
}

std::unique_ptr<StateSnapshot> KVCache::snapshot(int n) const {
  if (n <= 0 || n > length_) return nullptr;
  auto s = std::make_unique<StateSnapshot>();
  s->layout = layout();
  s->length = n;
  s->any_prefix = true;
  copy_rows_out(n, s->kv);
  return s;
}

bool KVCache::restore(const StateSnapshot& s) {
  if (s.layout != layout() || s.length <= 0 || s.length > capacity_ || !s.recurrent.empty() ||
      s.kv.size() != rows_bytes(s.length))
    return false;
  copy_rows_in(s.length, s.kv.data());
  length_ = s.length;
  return true;
}

}  // namespace dflash
