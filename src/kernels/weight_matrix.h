#pragma once
// A weight matrix [rows = outputs][cols = inputs] in one of the storage formats the kernels
// read directly. Q8_0 and Q4_0 use GGUF's block layouts (a scale per 32 weights) so GGUF
// files can later be read without conversion.
#include <cstddef>
#include <cstdint>
#include <memory>
#include <string>
#include <vector>

namespace dflash {

enum class WType { F32, F16, BF16, Q8_0, Q4_0 };

const char* wtype_name(WType t);
WType parse_wtype(const std::string& s);  // "f32", "f16", "bf16", "q8", "q8_0", "q4", "q4_0"

constexpr int kQBlock = 32;

struct BlockQ8_0 {
  uint16_t d;  // fp16 scale
  int8_t qs[kQBlock];
};
static_assert(sizeof(BlockQ8_0) == 34);

struct BlockQ4_0 {
  uint16_t d;         // fp16 scale
  uint8_t qs[kQBlock / 2];  // element j in the low nibble of byte j, j+16 in the high nibble
};
static_assert(sizeof(BlockQ4_0) == 18);

size_t row_bytes(WType t, int64_t cols);

struct WeightMatrix {
  WType type = WType::F32;
  int64_t rows = 0, cols = 0;
  const uint8_t* data = nullptr;           // rows * row_bytes(type, cols) bytes
  std::shared_ptr<const void> owner;       // keeps converted data alive (null when mmapped)

  const uint8_t* row(int64_t r) const { return data + size_t(r) * row_bytes(type, cols); }
  size_t bytes() const { return size_t(rows) * row_bytes(type, cols); }
};

// Encodes one fp32 row of `cols` values into row_bytes(type, cols) bytes at dst.
void quantize_row(const float* src, int64_t cols, WType type, uint8_t* dst);
// Converts fp32 rows to a storage format (quantizing for Q8_0/Q4_0) into an owned matrix.
WeightMatrix make_weight_matrix(const float* src, int64_t rows, int64_t cols, WType type);
// Decodes one row back to fp32.
void dequantize_row(const WeightMatrix& w, int64_t r, float* out);

}  // namespace dflash
