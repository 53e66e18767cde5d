// Plain reference attention: scores, softmax, weighted sum of values, one query row at a time.
// Quantized cache rows are decoded value by value (scale times code), as the fast kernel does.
#include <algorithm>
#include <cmath>
#include <vector>

#include "kernels/kernels.h"
#include "kernels/numeric.h"

namespace dflash::ref {

namespace {

void decode_kv_row(const uint8_t* row, int hd, WType t, float* out) {
  if (t == WType::F32) {
    const float* f = reinterpret_cast<const float*>(row);
    for (int d = 0; d < hd; ++d) out[d] = f[d];
  } else if (t == WType::F16) {
    const uint16_t* h = reinterpret_cast<const uint16_t*>(row);
    for (int d = 0; d < hd; ++d) out[d] = f16_to_f32(h[d]);
  } else if (t == WType::Q8_0) {
    const BlockQ8_0* b = reinterpret_cast<const BlockQ8_0*>(row);
    for (int d = 0; d < hd; ++d) out[d] = float(b[d / kQBlock].qs[d % kQBlock]) * f16_to_f32(b[d / kQBlock].d);
  } else {  // Q4_0: element j in the low nibble of byte j, element j+16 in the high nibble
    const BlockQ4_0* b = reinterpret_cast<const BlockQ4_0*>(row);
    for (int d = 0; d < hd; ++d) {
      const BlockQ4_0& blk = b[d / kQBlock];
      const int j = d % kQBlock;
      const int code = j < kQBlock / 2 ? (blk.qs[j] & 0xf) : (blk.qs[j - kQBlock / 2] >> 4);
      out[d] = float(code - 8) * f16_to_f32(blk.d);
    }
  }
}

}  // namespace

void attention(const AttentionArgs& a) {
  const int group = a.n_heads / a.n_kv_heads;
  const int hd = a.head_dim;
  const size_t rb = row_bytes(a.kv_type, hd);
  std::vector<float> p, kr(static_cast<size_t>(hd)), vr(static_cast<size_t>(hd));
  for (int i = 0; i < a.n_q; ++i) {
    for (int h = 0; h < a.n_heads; ++h) {
      const float* q = a.q + (int64_t(i) * a.n_heads + h) * hd;
      const uint8_t* K = static_cast<const uint8_t*>(a.k_cache) + size_t(h / group) * size_t(a.capacity) * rb;
      const uint8_t* V = static_cast<const uint8_t*>(a.v_cache) + size_t(h / group) * size_t(a.capacity) * rb;
      float* o = a.out + (int64_t(i) * a.n_heads + h) * hd;
      const int b = a.kbeg[i], e = a.kend[i];
      p.assign(size_t(std::max(0, e - b)), 0.0f);
      float mx = -INFINITY;
      for (int j = b; j < e; ++j) {
        decode_kv_row(K + size_t(j) * rb, hd, a.kv_type, kr.data());
        float s = 0;
        for (int d = 0; d < hd; ++d) s += q[d] * kr[size_t(d)];
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
