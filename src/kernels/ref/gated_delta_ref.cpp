// The Gated DeltaNet recurrence as plain loops, element by element in the order
// kernels/gated_delta.h defines: the twin the fast kernel is tested against.
#include "kernels/gated_delta.h"
#include "kernels/gated_delta_rows.h"

namespace dflash::ref {

void gated_delta_net(const GatedDeltaArgs& a) {
  const int dk = a.dk, dv = a.dv;
  for (int h = 0; h < a.nv; ++h)
    gdn::run_value_head(a, h, [&](const float* s_in, float* s, const float* q, const float* k, const float* v,
                                  float alpha, float beta, float* o) {
      float m[gdn::kMaxHeadDim], d[gdn::kMaxHeadDim];
      for (int c = 0; c < dv; ++c) m[c] = 0.0f;
      for (int i = 0; i < dk; ++i)
        for (int c = 0; c < dv; ++c) {
          const float x = alpha * s_in[size_t(i) * dv + c];
          s[size_t(i) * dv + c] = x;
          m[c] = m[c] + x * k[i];
        }
      for (int c = 0; c < dv; ++c) d[c] = beta * (v[c] - m[c]);
      if (o)
        for (int c = 0; c < dv; ++c) o[c] = 0.0f;
      for (int i = 0; i < dk; ++i)
        for (int c = 0; c < dv; ++c) {
          const float x = s[size_t(i) * dv + c] + k[i] * d[c];
          s[size_t(i) * dv + c] = x;
          if (o) o[c] = o[c] + x * q[i];
        }
    });
}

}  // namespace dflash::ref
