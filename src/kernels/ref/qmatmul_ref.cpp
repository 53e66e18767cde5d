// Plain reference twin of the int8 matmul path: the definition in kernels/cpu/quant_act.h
// written as directly as possible (integer weights decoded one at a time from the GGUF
// layouts, integer block sums, then the fixed fp32 combination).
#include <algorithm>
#include <cmath>

#include "kernels/cpu/quant_act.h"
#include "kernels/numeric.h"

namespace dflash {

void QuantActs::resize(int m, int64_t k) {
  rows = m;
  K = k;
  Kp = (k + kQK - 1) / kQK * kQK;
  q.assign(size_t(m) * size_t(Kp), 0);
  d.assign(size_t(m) * size_t(Kp / 32), 0.0f);
  s.assign(size_t(m) * size_t(Kp / 32), 0);
  s16.assign(size_t(m) * size_t(Kp / 16), 0);
}

namespace ref {

void quantize_acts(const float* x, int M, int64_t K, QuantActs& a) {
  a.resize(M, K);
  for (int r = 0; r < M; ++r) {
    const float* xr = x + int64_t(r) * K;
    int8_t* q = a.q.data() + size_t(r) * size_t(a.Kp);
    for (int64_t b = 0; b < K / 32; ++b) {
      float amax = 0;
      for (int i = 0; i < 32; ++i) amax = std::max(amax, std::fabs(xr[b * 32 + i]));
      const float id = amax > 0 ? 127.0f / amax : 0.0f;
      a.d[size_t(r) * size_t(a.Kp / 32) + size_t(b)] = amax / 127.0f;
      int sum = 0, half = 0;
      for (int i = 0; i < 32; ++i) {
        const float v = std::nearbyint(xr[b * 32 + i] * id);
        const int qi = int(std::min(127.0f, std::max(-127.0f, v)));
        q[b * 32 + i] = int8_t(qi);
        sum += qi;
        half += qi;
        if (i % 16 == 15) {
          a.s16[size_t(r) * size_t(a.Kp / 16) + size_t(2 * b + i / 16)] = int16_t(half);
          half = 0;
        }
      }
      a.s[size_t(r) * size_t(a.Kp / 32) + size_t(b)] = sum;
    }
  }
}

namespace {

// Integer weight i of block b (32 weights) of a row, and the block's float factors.
struct BlockTerm {
  const QuantActs& a;
  int r;
  float operator()(const WeightMatrix& w, int64_t n, int64_t b) const {
    const int8_t* x = a.qrow(r) + b * 32;
    const float dx = a.drow(r)[b];
    const uint8_t* row = w.row(n);
    switch (w.type) {
      case WType::Q4_K: {
        const BlockQ4_K& blk = reinterpret_cast<const BlockQ4_K*>(row)[b / 8];
        const int j = int(b % 8);
        int sc[8], mn[8];
        q4_k_scales(blk.scales, sc, mn);
        int isum = 0, xsum = 0;
        for (int i = 0; i < 32; ++i) {
          const uint8_t byte = blk.qs[32 * (j / 2) + i];
          const int q = (j & 1) ? byte >> 4 : byte & 15;
          isum += q * int(x[i]);
          xsum += int(x[i]);
        }
        return float(sc[j] * isum) * (f16_to_f32(blk.d) * dx) - float(mn[j] * xsum) * (f16_to_f32(blk.dmin) * dx);
      }
      case WType::Q6_K: {
        const BlockQ6_K& blk = reinterpret_cast<const BlockQ6_K*>(row)[b / 8];
        const int j = int(b % 8);
        int isum = 0;
        for (int h = 0; h < 2; ++h) {
          int part = 0;
          for (int i = 0; i < 16; ++i) part += q6_k_value(blk, 32 * j + 16 * h + i) * int(x[16 * h + i]);
          isum += int(blk.scales[2 * j + h]) * part;
        }
        return float(isum) * (f16_to_f32(blk.d) * dx);
      }
      default: return 0.0f;
    }
  }
};

}  // namespace

void qmatmul(const QuantActs& a, int M, const WeightMatrix& w, float* y) {
  const int64_t nb = w.cols / 32;
  if (w.type == WType::Q8_0 || w.type == WType::Q4_0) {
    const int off = w.type == WType::Q4_0 ? 8 : 0;
    for (int r = 0; r < M; ++r)
      for (int64_t n = 0; n < w.rows; ++n) {
        float acc = 0.0f;
        for (int64_t b = 0; b < nb; ++b) {
          int isum = 0;
          for (int i = 0; i < 32; ++i) isum += (quant_value(w, n, 32 * b + i) - off) * int(a.qrow(r)[32 * b + i]);
          acc = block_fma(isum, f16_to_f32(quant_scale(w, n, b)), a.drow(r)[b], acc);
        }
        y[int64_t(r) * w.rows + n] = acc;
      }
    return;
  }
  for (int r = 0; r < M; ++r) {
    const BlockTerm term{a, r};
    for (int64_t n = 0; n < w.rows; ++n) {
      float acc[kActGroup] = {0, 0, 0, 0, 0, 0, 0, 0};
      for (int64_t b = 0; b < nb; ++b) acc[b % kActGroup] += term(w, n, b);
      y[int64_t(r) * w.rows + n] = ((acc[0] + acc[1]) + (acc[2] + acc[3])) + ((acc[4] + acc[5]) + (acc[6] + acc[7]));
    }
  }
}

}  // namespace ref
}  // namespace dflash
