#include "models/weight_loader.h"

#include <cstring>
#include <stdexcept>

#include "kernels/numeric.h"
#include "util/error.h"

namespace dflash {

std::string shape_str(const std::vector<int64_t>& s) {
  std::string o = "[";
  for (size_t i = 0; i < s.size(); ++i) o += (i ? ", " : "") + std::to_string(s[i]);
  return o + "]";
}

std::string WeightLoader::detect_prefix(const std::string& probe) const {
  for (const char* p : {"model.", "model.language_model.", "language_model.model.", ""})
    if (store_.find(p + probe)) return p;
  throw file_error(dir_, "missing tensor '" + probe + "' (looked under the prefixes model., "
                         "model.language_model., language_model.model. and none)");
}

const TensorView& WeightLoader::get(const std::string& name, const std::vector<int64_t>& shape) const {
  const TensorView* t = store_.find(name);
  if (!t) throw file_error(dir_, "missing tensor '" + name + "'");
  if (t->shape != shape)
    throw file_error(t->file, "tensor '" + name + "' has shape " + shape_str(t->shape) + ", expected " +
                                  shape_str(shape) + " from config.json");
  if (t->dtype == DType::Unsupported)
    throw file_error(t->file, "tensor '" + name + "' has dtype " + t->dtype_str +
                                  ", which is not supported (supported: F32, F16, BF16)");
  return *t;
}

static WType stored_wtype(DType d) {
  return d == DType::F32 ? WType::F32 : d == DType::F16 ? WType::F16 : WType::BF16;
}

static void decode_row(const TensorView& t, int64_t r, int64_t cols, float* out) {
  const uint8_t* p = t.data + size_t(r) * size_t(cols) * dtype_size(t.dtype);
  for (int64_t i = 0; i < cols; ++i) {
    if (t.dtype == DType::F32) {
      std::memcpy(&out[i], p + 4 * i, 4);
    } else {
      uint16_t h;
      std::memcpy(&h, p + 2 * i, 2);
      out[i] = t.dtype == DType::BF16 ? bf16_to_f32(h) : f16_to_f32(h);
    }
  }
}

WeightMatrix WeightLoader::matrix(const TensorView& t, std::optional<WType> type) const {
  const int64_t rows = t.shape[0], cols = t.shape.size() > 1 ? t.shape[1] : 1;
  const WType src = stored_wtype(t.dtype);
  const WType dst = type.value_or(src);
  if (dst == src) {  // mmapped, no copy
    WeightMatrix w;
    w.type = dst;
    w.rows = rows;
    w.cols = cols;
    w.data = t.data;
    return w;
  }
  return encode_rows(t.file, t.name, rows, cols, dst, [&](int64_t r, uint8_t* out, float* scratch) {
    decode_row(t, r, cols, scratch);
    quantize_row(scratch, cols, dst, out);
  });
}

WeightMatrix WeightLoader::matrix(const std::string& name, int64_t rows, int64_t cols, std::optional<WType> type,
                                  int64_t qk_head_dim) const {
  if (qk_head_dim != 0) throw std::logic_error("WeightLoader: Hugging Face checkpoints have no llama.cpp row order");
  return matrix(get(name, {rows, cols}), type);
}

std::vector<float> WeightLoader::vector(const std::string& name, int64_t n) const {
  const TensorView& t = get(name, {n});
  std::vector<float> v(static_cast<size_t>(n));
  decode_row(t, 0, n, v.data());
  return v;
}

std::vector<float> WeightLoader::values(const std::string& name, const std::vector<int64_t>& shape) const {
  const TensorView& t = get(name, shape);
  int64_t n = 1;
  for (int64_t d : shape) n *= d;
  std::vector<float> v(static_cast<size_t>(n));
  decode_row(t, 0, n, v.data());
  return v;
}

}  // namespace dflash
