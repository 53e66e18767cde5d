// Plain reference attention: scores, softmax, weighted sum of values, one query row at a time.
// Values in Q8_0/Q4_0 caches are decoded value by value (scale times code), as the fast kernel
// does. Scores against Q8_0/Q4_0 keys follow the integer definition in kernels.h: the query
// row quantized like an activation row, exact integer dot products per block of 32.
#include <algorithm>
#include <cmath>
#include <vector>

#include "kernels/cpu/quant_act.h"
#include "kernels/kernels.h"
#include "kernels/numeric.h"

namespace dflash::ref {

namespace {

// Code i of a Q8_0/Q4_0 row, signed (Q4_0: element j in the low nibble of byte j, element
// j+16 in the high nibble), and the scale of its block b.
int block_code(const uint8_t* row, WType t, int i) {
  if (t == WType::Q8_0) return reinterpret_cast<const BlockQ8_0*>(row)[i / kQBlock].qs[i % kQBlock];
  const BlockQ4_0& blk = reinterpret_cast<const BlockQ4_0*>(row)[i / kQBlock];
  const int j = i % kQBlock;
  return (j < kQBlock / 2 ? (blk.qs[j] & 0xf) : (blk.qs[j - kQBlock / 2] >> 4)) - 8;
}

float block_scale(const uint8_t* row, WType t, int b) {
  return f16_to_f32(t == WType::Q8_0 ? reinterpret_cast<const BlockQ8_0*>(row)[b].d
                                     : reinterpret_cast<const BlockQ4_0*>(row)[b].d);
}

void decode_kv_row(const uint8_t* row, int hd, WType t, float* out) {
  if (t == WType::F32) {
    const float* f = reinterpret_cast<const float*>(row);
    for (int d = 0; d < hd; ++d) out[d] = f[d];
  } else if (t == WType::F16) {
    const uint16_t* h = reinterpret_cast<const uint16_t*>(row);
    for (int d = 0; d < hd; ++d) out[d] = f16_to_f32(h[d]);
  } else {
    for (int d = 0; d < hd; ++d) out[d] = float(block_code(row, t, d)) * block_scale(row, t, d / kQBlock);
  }
}

}  // namespace

void attention(const AttentionArgs& a) {
  const int group = a.n_heads / a.n_kv_heads;
  const int hd = a.head_dim;
  const size_t rb = row_bytes(a.kv_type, hd);
  const bool int_keys = a.kv_type == WType::Q8_0 || a.kv_type == WType::Q4_0;
  std::vector<float> p, kr(static_cast<size_t>(hd)), vr(static_cast<size_t>(hd));
  QuantActs qa;
  for (int i = 0; i < a.n_q; ++i) {
    for (int h = 0; h < a.n_heads; ++h) {
      const float* q = a.q + (int64_t(i) * a.n_heads + h) * hd;
      const uint8_t* K = static_cast<const uint8_t*>(a.k_cache) + size_t(h / group) * size_t(a.capacity) * rb;
      const uint8_t* V = static_cast<const uint8_t*>(a.v_cache) + size_t(h / group) * size_t(a.capacity) * rb;
      float* o = a.out + (int64_t(i) * a.n_heads + h) * hd;
      const int b = a.kbeg[i], e = a.kend[i];
      p.assign(size_t(std::max(0, e - b)), 0.0f);
      float mx = -INFINITY;
      if (int_keys) ref::quantize_acts(q, 1, hd, qa);
      for (int j = b; j < e; ++j) {
        const uint8_t* krow = K + size_t(j) * rb;
        float s = 0;
        if (int_keys) {
          for (int blk = 0; blk < hd / kQBlock; ++blk) {
            int32_t isum = 0;
            for (int c = blk * kQBlock; c < (blk + 1) * kQBlock; ++c) isum += int32_t(qa.q[size_t(c)]) * block_code(krow, a.kv_type, c);
            s = block_fma(isum, block_scale(krow, a.kv_type, blk), qa.d[size_t(blk)], s);
          }
        } else {
          decode_kv_row(krow, hd, a.kv_type, kr.data());
          for (int d = 0; d < hd; ++d) s += q[d] * kr[size_t(d)];
        }
        p[size_t(j - b)] = s * a.scale;
        mx = std::max(mx, p[size_t(j - b)]);
      }
      float sum = 0;
      for (auto& v : p) sum += (v = std::exp(v - mx));
      for (int d = 0; d < hd; ++d) o[d] = 0;
      for (int j = b; j < e; ++j) {
        decode_kv_row(V + size_t(j) * rb, hd, a.kv_type, vr.data());
        for (int d = 0; d < hd; ++d) o[d] += p[size_t(j - b)] * vr[size_t(d)];
      }
      const float inv = e > b ? 1.0f / sum : 0.0f;
      for (int d = 0; d < hd; ++d) o[d] *= inv;
    }
  }
}

}  // namespace dflash::ref
