#include "kernels/weight_matrix.h"

#include <algorithm>
#include <cmath>
#include <cstring>

#include "kernels/numeric.h"
#include "util/error.h"

namespace dflash {

const char* wtype_name(WType t) {
  switch (t) {
    case WType::F32: return "f32";
    case WType::F16: return "f16";
    case WType::BF16: return "bf16";
    case WType::Q8_0: return "q8_0";
    case WType::Q4_0: return "q4_0";
  }
  return "?";
}

WType parse_wtype(const std::string& s) {
  if (s == "f32") return WType::F32;
  if (s == "f16") return WType::F16;
  if (s == "bf16") return WType::BF16;
  if (s == "q8" || s == "q8_0") return WType::Q8_0;
  if (s == "q4" || s == "q4_0") return WType::Q4_0;
  throw Error("unknown weight format '" + s + "' (expected f32, f16, bf16, q8 or q4)");
}

size_t row_bytes(WType t, int64_t cols) {
  switch (t) {
    case WType::F32: return size_t(cols) * 4;
    case WType::F16:
    case WType::BF16: return size_t(cols) * 2;
    case WType::Q8_0: return size_t(cols / kQBlock) * sizeof(BlockQ8_0);
    case WType::Q4_0: return size_t(cols / kQBlock) * sizeof(BlockQ4_0);
  }
  return 0;
}

static void quantize_row_q8_0(const float* x, int64_t n, BlockQ8_0* out) {
  for (int64_t b = 0; b < n / kQBlock; ++b) {
    const float* v = x + b * kQBlock;
    float amax = 0;
    for (int i = 0; i < kQBlock; ++i) amax = std::max(amax, std::fabs(v[i]));
    const float d = amax / 127.0f;
    const float id = d != 0 ? 1.0f / d : 0.0f;
    out[b].d = f32_to_f16(d);
    for (int i = 0; i < kQBlock; ++i) out[b].qs[i] = int8_t(std::lround(v[i] * id));
  }
}

// Q4_0 as GGUF defines it: the value of largest magnitude maps to -8, scale d = max / -8.
static void quantize_row_q4_0(const float* x, int64_t n, BlockQ4_0* out) {
  for (int64_t b = 0; b < n / kQBlock; ++b) {
    const float* v = x + b * kQBlock;
    float amax = 0, maxv = 0;
    for (int i = 0; i < kQBlock; ++i)
      if (std::fabs(v[i]) > amax) {
        amax = std::fabs(v[i]);
        maxv = v[i];
      }
    const float d = maxv / -8.0f;
    const float id = d != 0 ? 1.0f / d : 0.0f;
    out[b].d = f32_to_f16(d);
    for (int i = 0; i < kQBlock / 2; ++i) {
      int q0 = std::min(15, int(v[i] * id + 8.5f));
      int q1 = std::min(15, int(v[i + kQBlock / 2] * id + 8.5f));
      out[b].qs[i] = uint8_t(std::max(q0, 0) | (std::max(q1, 0) << 4));
    }
  }
}

void quantize_row(const float* s, int64_t cols, WType type, uint8_t* d) {
  switch (type) {
    case WType::F32: std::memcpy(d, s, size_t(cols) * 4); break;
    case WType::F16:
      for (int64_t i = 0; i < cols; ++i) reinterpret_cast<uint16_t*>(d)[i] = f32_to_f16(s[i]);
      break;
    case WType::BF16:
      for (int64_t i = 0; i < cols; ++i) reinterpret_cast<uint16_t*>(d)[i] = f32_to_bf16(s[i]);
      break;
    case WType::Q8_0: quantize_row_q8_0(s, cols, reinterpret_cast<BlockQ8_0*>(d)); break;
    case WType::Q4_0: quantize_row_q4_0(s, cols, reinterpret_cast<BlockQ4_0*>(d)); break;
  }
}

WeightMatrix make_weight_matrix(const float* src, int64_t rows, int64_t cols, WType type) {
  if ((type == WType::Q8_0 || type == WType::Q4_0) && cols % kQBlock != 0)
    throw Error("cannot quantize a matrix with " + std::to_string(cols) +
                " columns to " + wtype_name(type) + ": columns must be a multiple of 32");
  WeightMatrix w;
  w.type = type;
  w.rows = rows;
  w.cols = cols;
  const size_t rb = row_bytes(type, cols);
  auto buf = std::shared_ptr<uint8_t[]>(new uint8_t[rb * size_t(rows) + 64]);
  for (int64_t r = 0; r < rows; ++r) quantize_row(src + r * cols, cols, type, buf.get() + size_t(r) * rb);
  w.data = buf.get();
  w.owner = buf;
  return w;
}

void dequantize_row(const WeightMatrix& w, int64_t r, float* out) {
  const uint8_t* p = w.row(r);
  const int64_t n = w.cols;
  switch (w.type) {
    case WType::F32: std::memcpy(out, p, size_t(n) * 4); break;
    case WType::F16:
      for (int64_t i = 0; i < n; ++i) out[i] = f16_to_f32(reinterpret_cast<const uint16_t*>(p)[i]);
      break;
    case WType::BF16:
      for (int64_t i = 0; i < n; ++i) out[i] = bf16_to_f32(reinterpret_cast<const uint16_t*>(p)[i]);
      break;
    case WType::Q8_0: {
      auto* b = reinterpret_cast<const BlockQ8_0*>(p);
      for (int64_t k = 0; k < n / kQBlock; ++k) {
        const float d = f16_to_f32(b[k].d);
        for (int i = 0; i < kQBlock; ++i) out[k * kQBlock + i] = d * float(b[k].qs[i]);
      }
      break;
    }
    case WType::Q4_0: {
      auto* b = reinterpret_cast<const BlockQ4_0*>(p);
      for (int64_t k = 0; k < n / kQBlock; ++k) {
        const float d = f16_to_f32(b[k].d);
        for (int i = 0; i < kQBlock / 2; ++i) {
          out[k * kQBlock + i] = d * float(int(b[k].qs[i] & 0xf) - 8);
          out[k * kQBlock + i + kQBlock / 2] = d * float(int(b[k].qs[i] >> 4) - 8);
        }
      }
      break;
    }
  }
}

}  // namespace dflash
