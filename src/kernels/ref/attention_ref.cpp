// Plain reference attention: scores, softmax, weighted sum of values, one query row at a time.
#include <algorithm>
#include <cmath>
#include <vector>

#include "kernels/kernels.h"

namespace dflash::ref {

void attention(const AttentionArgs& a) {
  const int group = a.n_heads / a.n_kv_heads;
  const int hd = a.head_dim;
  std::vector<float> p;
  for (int i = 0; i < a.n_q; ++i) {
    for (int h = 0; h < a.n_heads; ++h) {
      const float* q = a.q + (int64_t(i) * a.n_heads + h) * hd;
      const float* K = a.k_cache + int64_t(h / group) * a.capacity * hd;
      const float* V = a.v_cache + int64_t(h / group) * a.capacity * hd;
      float* o = a.out + (int64_t(i) * a.n_heads + h) * hd;
      const int b = a.kbeg[i], e = a.kend[i];
      p.assign(size_t(std::max(0, e - b)), 0.0f);
      float mx = -INFINITY;
      for (int j = b; j < e; ++j) {
        float s = 0;
        for (int d = 0; d < hd; ++d) s += q[d] * K[int64_t(j) * hd + d];
        p[size_t(j - b)] = s * a.scale;
        mx = std::max(mx, p[size_t(j - b)]);
      }
      float sum = 0;
      for (auto& v : p) sum += (v = std::exp(v - mx));
      for (int d = 0; d < hd; ++d) o[d] = 0;
      for (int j = b; j < e; ++j)
        for (int d = 0; d < hd; ++d) o[d] += p[size_t(j - b)] * V[int64_t(j) * hd + d];
      const float inv = e > b ? 1.0f / sum : 0.0f;
      for (int d = 0; d < hd; ++d) o[d] *= inv;
    }
  }
}

}  // namespace dflash::ref
