#include "models/gguf_weights.h"

#include <cstring>

#include "util/error.h"

namespace dflash {

bool gguf_wtype(uint32_t ggml, WType& out) {
  switch (GgmlType(ggml)) {
    case GgmlType::F32: out = WType::F32; return true;
    case GgmlType::F16: out = WType::F16; return true;
    case GgmlType::BF16: out = WType::BF16; return true;
    case GgmlType::Q8_0: out = WType::Q8_0; return true;
    case GgmlType::Q4_0: out = WType::Q4_0; return true;
    case GgmlType::Q4_K: out = WType::Q4_K; return true;
    case GgmlType::Q6_K: out = WType::Q6_K; return true;
    default: return false;
  }
}

GgmlType ggml_type_of(WType t) {
  switch (t) {
    case WType::F32: return GgmlType::F32;
    case WType::F16: return GgmlType::F16;
    case WType::BF16: return GgmlType::BF16;
    case WType::Q8_0: return GgmlType::Q8_0;
    case WType::Q4_0: return GgmlType::Q4_0;
    default: throw Error(std::string("convert: no GGUF type for ") + wtype_name(t));
  }
}

uint32_t gguf_file_type(WType t) {
  switch (t) {
    case WType::F32: return 0;
    case WType::F16: return 1;
    case WType::Q4_0: return 2;
    case WType::Q8_0: return 7;
    case WType::BF16: return 32;
    default: return 0;
  }
}

namespace {

std::string ne_str(const std::vector<int64_t>& ne) {
  std::string s = "[";
  for (size_t i = 0; i < ne.size(); ++i) s += (i ? ", " : "") + std::to_string(ne[i]);
  return s + "]";
}

}  // namespace

const GgufTensor& GgufWeights::get(const std::string& name, std::vector<int64_t> ne) const {
  const GgufTensor* t = f_.tensor(name);
  if (!t) throw file_error(f_.path(), "missing tensor '" + name + "'");
  // A trailing 1 is how some writers spell a vector or matrix; ignore it.
  std::vector<int64_t> have = t->ne;
  while (have.size() > ne.size() && have.back() == 1) have.pop_back();
  if (have != ne)
    throw file_error(f_.path(), "tensor '" + name + "' has shape " + ne_str(t->ne) + " (innermost first), expected " +
                                    ne_str(ne) + " from the metadata");
  WType w;
  if (!gguf_wtype(t->type, w))
    throw file_error(f_.path(), "tensor '" + name + "' has type " + ggml_type_name(t->ggml()) + " (" +
                                    std::to_string(t->type) +
                                    "), which is unsupported (supported: F32, F16, BF16, Q8_0, Q4_0, Q4_K, Q6_K)");
  return *t;
}

WeightMatrix GgufWeights::matrix(const std::string& name, int64_t rows, int64_t cols, std::optional<WType> type,
                                 int64_t qk_head_dim) const {
  const GgufTensor& t = get(name, {cols, rows});
  WType src;
  gguf_wtype(t.type, src);
  WeightMatrix view;
  view.type = src;
  view.rows = rows;
  view.cols = cols;
  view.data = t.data;
  const WType dst = type.value_or(src);
  if (dst == src && qk_head_dim == 0) return view;
  return encode_rows(f_.path(), name, rows, cols, dst, [&](int64_t r, uint8_t* out, float* scratch) {
    const int64_t sr = qk_head_dim ? llama_qk_gguf_row(r, qk_head_dim) : r;
    if (dst == src) {
      std::memcpy(out, view.row(sr), row_bytes(dst, cols));
    } else {
      dequantize_row(view, sr, scratch);
      quantize_row(scratch, cols, dst, out);
    }
  });
}

std::vector<float> GgufWeights::vector(const std::string& name, int64_t n) const {
  const GgufTensor& t = get(name, {n});
  WType src;
  gguf_wtype(t.type, src);
  if (src != WType::F32 && src != WType::F16 && src != WType::BF16)
    throw file_error(f_.path(), "tensor '" + name + "' is a vector stored as " + ggml_type_name(t.ggml()) +
                                    " (vectors must be F32, F16 or BF16)");
  WeightMatrix view;
  view.type = src;
  view.rows = 1;
  view.cols = n;
  view.data = t.data;
  std::vector<float> v(static_cast<size_t>(n));
  dequantize_row(view, 0, v.data());
  return v;
}

}  // namespace dflash
