#pragma once
// A weight matrix [rows = outputs][cols = inputs] in one of the storage formats the kernels
// read directly. Q8_0, Q4_0, Q4_K and Q6_K use GGUF's block layouts byte for byte (a row is
// its blocks one after another) so mmapped GGUF tensors are read without conversion.
#include <cstddef>
#include <cstdint>
#include <memory>
#include <string>
#include <vector>

namespace dflash {

enum class WType { F32, F16, BF16, Q8_0, Q4_0, Q4_K, Q6_K };

const char* wtype_name(WType t);
WType parse_wtype(const std::string& s);  // "f32", "f16", "bf16", "q8", "q8_0", "q4", "q4_0", "q4_k", "q6_k"

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

// k-quants: super-blocks of 256 weights.
constexpr int kQK = 256;

// Q4_K: weight = d * sc[j] * q - dmin * m[j] for sub-block j (32 weights), q in 0..15. The
// eight 6-bit sc and m are packed into scales[12]: for j < 4, sc[j] and m[j] are the low 6
// bits of scales[j] and scales[j + 4]; for j >= 4 the low 4 bits sit in the nibbles of
// scales[j + 4] (sc low, m high) and the top 2 bits in the top bits of scales[j - 4] (sc)
// and scales[j] (m). qs: 64 weights per 32 bytes, the first 32 in the low nibbles.
struct BlockQ4_K {
  uint16_t d;     // fp16 super-scale of sc
  uint16_t dmin;  // fp16 super-scale of m
  uint8_t scales[12];
  uint8_t qs[kQK / 2];
};
static_assert(sizeof(BlockQ4_K) == 144);

// Q6_K: weight = d * scales[e / 16] * (q - 32), q in 0..63. Per half of 128 weights, element
// 32g + l (g < 4, l < 32) keeps its low 4 bits in ql[l + 32 * (g & 1)] (low nibble for g < 2)
// and its high 2 bits at bit 2g of qh[l]; ql advances 64 bytes and qh 32 bytes per half.
struct BlockQ6_K {
  uint8_t ql[kQK / 2];
  uint8_t qh[kQK / 4];
  int8_t scales[kQK / 16];
  uint16_t d;  // fp16
};
static_assert(sizeof(BlockQ6_K) == 210);

// Weights per block of the format (1 for the float formats).
int block_elems(WType t);

size_t row_bytes(WType t, int64_t cols);

// The interleaved ("packed") layout of Q8_0 and Q4_0 that the int8 kernels stream: rows in
// groups of 16, so that one 64-byte load holds 4 consecutive weights of each of 16 rows,
// which is what a 16-lane int8 dot product multiplies with 4 broadcast activation bytes.
// Per group, blocks go in pairs: the quants of block 2p, then of block 2p+1, then the 16
// fp16 scales of each (a pair is a whole number of 64-byte lines). Groups come in sets of 4
// (64 rows, the last set padded with zero rows) whose pairs are interleaved: pair p of
// groups 0, 1, 2, 3, then pair p + 1 of each, so the decode kernel, which walks 4 groups at
// once, reads one sequential stream.
//   Q4_0: 256 quant bytes per block, 4 chunks of 64; in chunk c, byte 4r + j (row r < 16,
//         j < 4) holds q(r, 4c + j) in its low nibble and q(r, 16 + 4c + j) in its high
//         nibble, q being the stored 0..15 (weight = d * (q - 8)).
//   Q8_0: 512 quant bytes per block, 8 chunks of 64; in chunk c, byte 4r + j holds
//         q(r, 4c + j) + 128 as an unsigned byte (the bias VNNI's u8 x s8 product wants).
// A block count that is odd leaves the second half of each group's last pair zero.
constexpr int kPackRows = 16, kPackGroupSet = 4;
struct PackedGeometry {
  int64_t groups = 0, blocks = 0;  // groups of 16 rows (a multiple of 4), 32-weight blocks per row
  int64_t qbytes = 0;              // quant bytes of one block of one group (256 or 512)
  int64_t pair_bytes = 0;          // one group's pair of blocks with their scales
  int64_t set_bytes = 0;           // a set of 4 groups, all their pairs
};
PackedGeometry packed_geometry(WType t, int64_t rows, int64_t cols);

struct WeightMatrix {
  WType type = WType::F32;
  int64_t rows = 0, cols = 0;
  const uint8_t* data = nullptr;           // rows * row_bytes(type, cols) bytes, or the packed groups
  std::shared_ptr<const void> owner;       // keeps converted data alive (null when mmapped)
  bool packed = false;                     // Q8_0/Q4_0 in the interleaved layout above

  // Row-major layouts only (a packed matrix has no contiguous rows).
  const uint8_t* row(int64_t r) const { return data + size_t(r) * row_bytes(type, cols); }
  size_t bytes() const;
  // Packed layout: the quants of block b of group g, and its 16 fp16 scales.
  const uint8_t* packed_quants(const PackedGeometry& pg, int64_t g, int64_t b) const {
    return data + (g / kPackGroupSet) * pg.set_bytes + ((b / 2) * kPackGroupSet + g % kPackGroupSet) * pg.pair_bytes +
           (b & 1) * pg.qbytes;
  }
  const uint16_t* packed_scales(const PackedGeometry& pg, int64_t g, int64_t b) const {
    return reinterpret_cast<const uint16_t*>(packed_quants(pg, g, b - (b & 1)) + 2 * pg.qbytes + (b & 1) * 32);
  }
};

// Whether pack_weight_matrix changes this matrix (Q8_0 and Q4_0 in row layout).
inline bool packable(const WeightMatrix& w) {
  return !w.packed && (w.type == WType::Q8_0 || w.type == WType::Q4_0);
}
// The interleaved copy of a Q8_0/Q4_0 matrix (64-byte aligned, owned); any other matrix is
// returned as it is. Lossless: dequantize_row gives the same values from either layout.
WeightMatrix pack_weight_matrix(const WeightMatrix& w);
// The stored integer weight (Q8_0: -128..127; Q4_0: 0..15, before the -8) and fp16 scale of
// row r, column k / block b, from either layout.
int quant_value(const WeightMatrix& w, int64_t r, int64_t k);
uint16_t quant_scale(const WeightMatrix& w, int64_t r, int64_t b);

// Encodes one fp32 row of `cols` values into row_bytes(type, cols) bytes at dst.
void quantize_row(const float* src, int64_t cols, WType type, uint8_t* dst);
// An owned, row-major matrix whose rows * row_bytes(type, cols) bytes the caller fills through
// *bytes (64 bytes of slack past the end, which the kernels' wide loads may touch).
WeightMatrix alloc_weight_matrix(WType type, int64_t rows, int64_t cols, uint8_t** bytes);
// Converts fp32 rows to a storage format (quantizing for Q8_0/Q4_0/Q4_K/Q6_K) into an owned
// matrix; cols must be a multiple of block_elems(type).
WeightMatrix make_weight_matrix(const float* src, int64_t rows, int64_t cols, WType type);
// Uniform noise in [-0.035, 0.035) from an xorshift64 stream (advanced in place), encoded row
// by row: random models of real shapes, a billion weights in seconds, for speed benchmarks.
WeightMatrix random_weight_matrix(uint64_t& state, int64_t rows, int64_t cols, WType type);
// Decodes one row back to fp32.
void dequantize_row(const WeightMatrix& w, int64_t r, float* out);

// The eight 6-bit sub-block scales and mins of a Q4_K super-block.
void q4_k_scales(const uint8_t* scales12, int* sc, int* mn);
// Weight e (< 256) of a Q6_K super-block as its signed 6-bit integer (-32..31).
int q6_k_value(const BlockQ6_K& b, int e);

}  // namespace dflash
