#include "kernels/weight_matrix.h"

#include <algorithm>
#include <cmath>
#include <cstring>

#include "kernels/kernels.h"
#include "kernels/numeric.h"
#include "util/error.h"
#include "util/mapped_file.h"

namespace dflash {

const char* wtype_name(WType t) {
  switch (t) {
    case WType::F32: return "f32";
    case WType::F16: return "f16";
    case WType::BF16: return "bf16";
    case WType::Q8_0: return "q8_0";
    case WType::Q4_0: return "q4_0";
    case WType::Q4_K: return "q4_k";
    case WType::Q6_K: return "q6_k";
  }
  return "?";
}

WType parse_wtype(const std::string& s) {
  if (s == "f32") return WType::F32;
  if (s == "f16") return WType::F16;
  if (s == "bf16") return WType::BF16;
  if (s == "q8" || s == "q8_0") return WType::Q8_0;
  if (s == "q4" || s == "q4_0") return WType::Q4_0;
  if (s == "q4_k") return WType::Q4_K;
  if (s == "q6_k") return WType::Q6_K;
  throw Error("unknown weight format '" + s + "' (expected f32, f16, bf16, q8, q4, q4_k or q6_k)");
}

int block_elems(WType t) {
  switch (t) {
    case WType::Q8_0:
    case WType::Q4_0: return kQBlock;
    case WType::Q4_K:
    case WType::Q6_K: return kQK;
    default: return 1;
  }
}

size_t row_bytes(WType t, int64_t cols) {
  switch (t) {
    case WType::F32: return size_t(cols) * 4;
    case WType::F16:
    case WType::BF16: return size_t(cols) * 2;
    case WType::Q8_0: return size_t(cols / kQBlock) * sizeof(BlockQ8_0);
    case WType::Q4_0: return size_t(cols / kQBlock) * sizeof(BlockQ4_0);
    case WType::Q4_K: return size_t(cols / kQK) * sizeof(BlockQ4_K);
    case WType::Q6_K: return size_t(cols / kQK) * sizeof(BlockQ6_K);
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

// Q4_K: each sub-block of 32 is fitted by [min(0, lo), hi] over 15 steps; the sub-scales and
// mins are then expressed in 6 bits of two fp16 super-scales, and q is chosen against the
// rounded values actually stored, so dequantization sees the grid it was quantized to.
static void quantize_row_q4_k(const float* x, int64_t n, BlockQ4_K* out) {
  for (int64_t b = 0; b < n / kQK; ++b) {
    const float* v = x + b * kQK;
    float scale[8], minv[8];
    float smax = 0, mmax = 0;
    for (int j = 0; j < 8; ++j) {
      float lo = 0, hi = 0;
      for (int i = 0; i < 32; ++i) lo = std::min(lo, v[32 * j + i]), hi = std::max(hi, v[32 * j + i]);
      scale[j] = (hi - lo) / 15.0f;
      minv[j] = -lo;
      smax = std::max(smax, scale[j]);
      mmax = std::max(mmax, minv[j]);
    }
    BlockQ4_K& o = out[b];
    std::memset(&o, 0, sizeof(o));
    o.d = f32_to_f16(smax / 63.0f);
    o.dmin = f32_to_f16(mmax / 63.0f);
    const float d = f16_to_f32(o.d), dmin = f16_to_f32(o.dmin);
    int sc[8], mn[8];
    for (int j = 0; j < 8; ++j) {
      sc[j] = d > 0 ? std::clamp(int(std::lround(scale[j] / d)), 0, 63) : 0;
      mn[j] = dmin > 0 ? std::clamp(int(std::lround(minv[j] / dmin)), 0, 63) : 0;
    }
    for (int j = 0; j < 4; ++j) {
      o.scales[j] = uint8_t((sc[j] & 63) | ((sc[j + 4] >> 4) << 6));
      o.scales[j + 4] = uint8_t((mn[j] & 63) | ((mn[j + 4] >> 4) << 6));
      o.scales[j + 8] = uint8_t((sc[j + 4] & 15) | ((mn[j + 4] & 15) << 4));
    }
    for (int j = 0; j < 8; ++j) {
      const float dj = d * float(sc[j]), mj = dmin * float(mn[j]);
      for (int i = 0; i < 32; ++i) {
        const int q = dj > 0 ? std::clamp(int(std::lround((v[32 * j + i] + mj) / dj)), 0, 15) : 0;
        uint8_t& byte = o.qs[32 * (j / 2) + i];
        byte = (j & 1) ? uint8_t((byte & 0x0f) | (q << 4)) : uint8_t((byte & 0xf0) | q);
      }
    }
  }
}

// Q6_K: a symmetric scale per 16 weights (31 steps each side), the sixteen scales in int8
// steps of one fp16 super-scale.
static void quantize_row_q6_k(const float* x, int64_t n, BlockQ6_K* out) {
  for (int64_t b = 0; b < n / kQK; ++b) {
    const float* v = x + b * kQK;
    float scale[16], smax = 0;
    for (int j = 0; j < 16; ++j) {
      float amax = 0;
      for (int i = 0; i < 16; ++i) amax = std::max(amax, std::fabs(v[16 * j + i]));
      scale[j] = amax / 31.0f;
      smax = std::max(smax, scale[j]);
    }
    BlockQ6_K& o = out[b];
    std::memset(&o, 0, sizeof(o));
    o.d = f32_to_f16(smax / 127.0f);
    const float d = f16_to_f32(o.d);
    for (int j = 0; j < 16; ++j) o.scales[j] = int8_t(d > 0 ? std::clamp(int(std::lround(scale[j] / d)), -128, 127) : 0);
    for (int e = 0; e < kQK; ++e) {
      const float de = d * float(o.scales[e / 16]);
      const int q = de != 0 ? std::clamp(int(std::lround(v[e] / de)), -32, 31) : 0;
      const int u = q + 32, h = e / 128, g = (e % 128) / 32, l = e % 32;
      uint8_t& lo = o.ql[64 * h + l + 32 * (g & 1)];
      lo = uint8_t(lo | ((u & 15) << (4 * (g >> 1))));
      o.qh[32 * h + l] = uint8_t(o.qh[32 * h + l] | ((u >> 4) << (2 * g)));
    }
  }
}

void quantize_row(const float* s, int64_t cols, WType type, uint8_t* d) {
  switch (type) {
    case WType::F32: std::memcpy(d, s, size_t(cols) * 4); break;
    case WType::F16: f32_to_f16_row(s, cols, reinterpret_cast<uint16_t*>(d)); break;
    case WType::BF16:
      for (int64_t i = 0; i < cols; ++i) reinterpret_cast<uint16_t*>(d)[i] = f32_to_bf16(s[i]);
      break;
    case WType::Q8_0: quantize_row_q8_0(s, cols, reinterpret_cast<BlockQ8_0*>(d)); break;
    case WType::Q4_0: quantize_row_q4_0(s, cols, reinterpret_cast<BlockQ4_0*>(d)); break;
    case WType::Q4_K: quantize_row_q4_k(s, cols, reinterpret_cast<BlockQ4_K*>(d)); break;
    case WType::Q6_K: quantize_row_q6_k(s, cols, reinterpret_cast<BlockQ6_K*>(d)); break;
  }
}

WeightMatrix alloc_weight_matrix(WType type, int64_t rows, int64_t cols, uint8_t** bytes) {
  WeightMatrix w;
  w.type = type;
  w.rows = rows;
  w.cols = cols;
  auto buf = std::shared_ptr<uint8_t[]>(new uint8_t[row_bytes(type, cols) * size_t(rows) + 64]);
  *bytes = buf.get();
  w.data = buf.get();
  w.owner = buf;
  return w;
}

WeightMatrix make_weight_matrix(const float* src, int64_t rows, int64_t cols, WType type) {
  if (cols % block_elems(type) != 0)
    throw Error("cannot quantize a matrix with " + std::to_string(cols) + " columns to " + wtype_name(type) +
                ": columns must be a multiple of " + std::to_string(block_elems(type)));
  uint8_t* buf = nullptr;
  WeightMatrix w = alloc_weight_matrix(type, rows, cols, &buf);
  const size_t rb = row_bytes(type, cols);
  for (int64_t r = 0; r < rows; ++r) quantize_row(src + r * cols, cols, type, buf + size_t(r) * rb);
  return w;
}

WeightMatrix random_weight_matrix(uint64_t& state, int64_t rows, int64_t cols, WType type) {
  uint8_t* buf = nullptr;
  WeightMatrix w = alloc_weight_matrix(type, rows, cols, &buf);
  const size_t rb = row_bytes(type, cols);
  std::vector<float> tmp(static_cast<size_t>(cols));
  for (int64_t r = 0; r < rows; ++r) {
    for (auto& v : tmp) {
      state ^= state << 13;
      state ^= state >> 7;
      state ^= state << 17;
      v = float(int64_t(state >> 40) - (int64_t(1) << 23)) * (0.035f / float(1 << 23));
    }
    quantize_row(tmp.data(), cols, type, buf + size_t(r) * rb);
  }
  return w;
}

PackedGeometry packed_geometry(WType t, int64_t rows, int64_t cols) {
  PackedGeometry g;
  const int64_t set_rows = kPackRows * kPackGroupSet;
  g.groups = (rows + set_rows - 1) / set_rows * kPackGroupSet;
  g.blocks = cols / kQBlock;
  g.qbytes = t == WType::Q8_0 ? 512 : 256;
  g.pair_bytes = 2 * g.qbytes + 2 * 32;
  g.set_bytes = (g.blocks + 1) / 2 * g.pair_bytes * kPackGroupSet;
  return g;
}

size_t WeightMatrix::bytes() const {
  if (packed) {
    const PackedGeometry pg = packed_geometry(type, rows, cols);
    return size_t(pg.groups / kPackGroupSet * pg.set_bytes);
  }
  return size_t(rows) * row_bytes(type, cols);
}

int quant_value(const WeightMatrix& w, int64_t r, int64_t k) {
  const int64_t b = k / kQBlock, i = k % kQBlock;
  if (!w.packed) {
    if (w.type == WType::Q8_0) return reinterpret_cast<const BlockQ8_0*>(w.row(r))[b].qs[i];
    const uint8_t byte = reinterpret_cast<const BlockQ4_0*>(w.row(r))[b].qs[i % 16];
    return i < 16 ? byte & 15 : byte >> 4;
  }
  const PackedGeometry pg = packed_geometry(w.type, w.rows, w.cols);
  const uint8_t* q = w.packed_quants(pg, r / kPackRows, b);
  const int64_t lane = r % kPackRows;
  if (w.type == WType::Q8_0) return int(q[64 * (i / 4) + 4 * lane + i % 4]) - 128;
  const uint8_t byte = q[64 * ((i % 16) / 4) + 4 * lane + i % 4];
  return i < 16 ? byte & 15 : byte >> 4;
}

uint16_t quant_scale(const WeightMatrix& w, int64_t r, int64_t b) {
  if (!w.packed) {
    if (w.type == WType::Q8_0) return reinterpret_cast<const BlockQ8_0*>(w.row(r))[b].d;
    return reinterpret_cast<const BlockQ4_0*>(w.row(r))[b].d;
  }
  const PackedGeometry pg = packed_geometry(w.type, w.rows, w.cols);
  return w.packed_scales(pg, r / kPackRows, b)[r % kPackRows];
}

WeightMatrix pack_weight_matrix(const WeightMatrix& w) {
  if (!packable(w)) return w;
  const PackedGeometry pg = packed_geometry(w.type, w.rows, w.cols);
  const size_t total = size_t(pg.groups / kPackGroupSet * pg.set_bytes);
  std::shared_ptr<uint8_t> buf = alloc_pages(total);  // zeroed, page-aligned
  WeightMatrix o = w;
  o.data = buf.get();
  o.owner = buf;
  o.packed = true;
  uint8_t* base = buf.get();
  for (int64_t r = 0; r < w.rows; ++r) {
    const int64_t g = r / kPackRows, lane = r % kPackRows;
    for (int64_t b = 0; b < pg.blocks; ++b) {
      uint8_t* q = base + (o.packed_quants(pg, g, b) - o.data);
      uint16_t* sc = reinterpret_cast<uint16_t*>(base + (reinterpret_cast<const uint8_t*>(o.packed_scales(pg, g, b)) - o.data));
      if (w.type == WType::Q8_0) {
        const BlockQ8_0& blk = reinterpret_cast<const BlockQ8_0*>(w.row(r))[b];
        sc[lane] = blk.d;
        for (int i = 0; i < kQBlock; ++i) q[64 * (i / 4) + 4 * lane + i % 4] = uint8_t(int(blk.qs[i]) + 128);
      } else {
        const BlockQ4_0& blk = reinterpret_cast<const BlockQ4_0*>(w.row(r))[b];
        sc[lane] = blk.d;
        // Stored byte i holds elements i (low) and i + 16 (high): the same pairing as packed.
        for (int i = 0; i < kQBlock / 2; ++i) q[64 * (i / 4) + 4 * lane + i % 4] = blk.qs[i];
      }
    }
  }
  return o;
}

void dequantize_row(const WeightMatrix& w, int64_t r, float* out) {
  const int64_t n = w.cols;
  if (w.packed) {
    for (int64_t k = 0; k < n; ++k) {
      const float d = f16_to_f32(quant_scale(w, r, k / kQBlock));
      const int q = quant_value(w, r, k);
      out[k] = d * float(w.type == WType::Q4_0 ? q - 8 : q);
    }
    return;
  }
  const uint8_t* p = w.row(r);
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
    case WType::Q4_K: {
      auto* b = reinterpret_cast<const BlockQ4_K*>(p);
      for (int64_t k = 0; k < n / kQK; ++k) {
        int sc[8], mn[8];
        q4_k_scales(b[k].scales, sc, mn);
        const float d = f16_to_f32(b[k].d), dmin = f16_to_f32(b[k].dmin);
        for (int e = 0; e < kQK; ++e) {
          const int j = e / 32;
          const uint8_t byte = b[k].qs[32 * (j / 2) + e % 32];
          const int q = (j & 1) ? byte >> 4 : byte & 15;
          out[k * kQK + e] = d * float(sc[j]) * float(q) - dmin * float(mn[j]);
        }
      }
      break;
    }
    case WType::Q6_K: {
      auto* b = reinterpret_cast<const BlockQ6_K*>(p);
      for (int64_t k = 0; k < n / kQK; ++k) {
        const float d = f16_to_f32(b[k].d);
        for (int e = 0; e < kQK; ++e)
          out[k * kQK + e] = d * float(b[k].scales[e / 16]) * float(q6_k_value(b[k], e));
      }
      break;
    }
  }
}

void q4_k_scales(const uint8_t* s, int* sc, int* mn) {
  for (int j = 0; j < 4; ++j) {
    sc[j] = s[j] & 63;
    mn[j] = s[j + 4] & 63;
    sc[j + 4] = (s[j + 8] & 15) | ((s[j] >> 6) << 4);
    mn[j + 4] = (s[j + 8] >> 4) | ((s[j + 4] >> 6) << 4);
  }
}

int q6_k_value(const BlockQ6_K& b, int e) {
  const int h = e / 128, g = (e % 128) / 32, l = e % 32;
  const int lo = (b.ql[64 * h + l + 32 * (g & 1)] >> (4 * (g >> 1))) & 15;
  const int hi = (b.qh[32 * h + l] >> (2 * g)) & 3;
  return (lo | (hi << 4)) - 32;
}

}  // namespace dflash
