// The Gated DeltaNet's causal depthwise convolution with SiLU (kernels/gated_delta.h), with
// channels in SIMD lanes: lane c does exactly channel c's multiply-adds in tap order and the
// fixed exp (kernels/fixed_exp.h) step by step, so the result is the plain twin's
// (kernels/ref/gated_delta_conv_ref.cpp) bit for bit. Its cost was the SiLU's library exp, one
// per channel and row (6144 per row and layer at Qwen3.5-0.8B), more than the recurrence.
#undef HWY_TARGET_INCLUDE
#define HWY_TARGET_INCLUDE "kernels/cpu/gated_delta_conv_hwy.cpp"
#include <hwy/foreach_target.h>  // IWYU pragma: keep
#include <hwy/highway.h>

#include "kernels/fixed_exp.h"
#include "kernels/gated_delta.h"

HWY_BEFORE_NAMESPACE();
namespace dflash {
namespace HWY_NAMESPACE {
namespace hn = hwy::HWY_NAMESPACE;

template <class D, class V = hn::Vec<D>>
V FixedExp(D d, V x) {
  namespace fe = fixed_exp;
  const hn::RebindToSigned<D> di;
  x = hn::IfThenElse(hn::Gt(x, hn::Set(d, fe::kLo)), x, hn::Set(d, fe::kLo));
  x = hn::IfThenElse(hn::Lt(x, hn::Set(d, fe::kHi)), x, hn::Set(d, fe::kHi));
  const V n = hn::Sub(hn::Add(hn::Mul(x, hn::Set(d, fe::kLog2e)), hn::Set(d, fe::kRound)), hn::Set(d, fe::kRound));
  const V r = hn::Sub(hn::Sub(x, hn::Mul(n, hn::Set(d, fe::kLn2Hi))), hn::Mul(n, hn::Set(d, fe::kLn2Lo)));
  V p = hn::Add(hn::Mul(hn::Set(d, fe::kC5), r), hn::Set(d, fe::kC4));
  p = hn::Add(hn::Mul(p, r), hn::Set(d, fe::kC3));
  p = hn::Add(hn::Mul(p, r), hn::Set(d, fe::kC2));
  p = hn::Add(hn::Mul(p, r), hn::Set(d, fe::kC1));
  p = hn::Add(hn::Mul(p, r), hn::Set(d, fe::kC0));
  const V e = hn::Add(hn::Add(hn::Mul(p, hn::Mul(r, r)), r), hn::Set(d, 1.0f));
  const auto bits = hn::ShiftLeft<23>(hn::Add(hn::ConvertTo(di, n), hn::Set(di, 127)));
  return hn::Mul(e, hn::BitCast(d, bits));
}

void FixedExpRow(const float* x, int n, float* y) {
  const hn::ScalableTag<float> d;
  const int L = int(hn::Lanes(d));
  int i = 0;
  for (; i + L <= n; i += L) hn::StoreU(FixedExp(d, hn::LoadU(d, x + i)), d, y + i);
  for (; i < n; ++i) y[i] = fixed_exp::exp(x[i]);
}

void CausalConvSilu(const ShortConvArgs& a) {
  const int K = a.kernel, C = a.channels;
  const hn::ScalableTag<float> d;
  const int L = int(hn::Lanes(d));
  // Four taps (every Qwen3.5 / Qwen3-Next checkpoint): each channel's weights are 4
  // consecutive floats, de-interleaved into one vector per tap. Other kernels: the twin.
  const int vec_end = K == 4 ? C - C % L : 0;
  for (int t = 0; t < a.rows; ++t) {
    const float* src[4] = {};
    if (K == 4)
      for (int j = 0; j < 4; ++j) {
        const int u = t - 3 + j;
        src[j] = u >= 0 ? a.in + size_t(u) * C : a.state + size_t(3 + u) * C;
      }
    float* out = a.out + size_t(t) * C;
    for (int c = 0; c < vec_end; c += L) {
      hn::Vec<decltype(d)> w0, w1, w2, w3;
      hn::LoadInterleaved4(d, a.weight + size_t(c) * 4, w0, w1, w2, w3);
      auto s = hn::Zero(d);
      s = hn::Add(s, hn::Mul(w0, hn::LoadU(d, src[0] + c)));
      s = hn::Add(s, hn::Mul(w1, hn::LoadU(d, src[1] + c)));
      s = hn::Add(s, hn::Mul(w2, hn::LoadU(d, src[2] + c)));
      s = hn::Add(s, hn::Mul(w3, hn::LoadU(d, src[3] + c)));
      const auto e = FixedExp(d, hn::Neg(s));
      hn::StoreU(hn::Div(s, hn::Add(hn::Set(d, 1.0f), e)), d, out + c);
    }
    for (int c = vec_end; c < C; ++c) {
      float s = 0.0f;
      for (int j = 0; j < K; ++j) {
        const int u = t - (K - 1) + j;
        const float x = u >= 0 ? a.in[size_t(u) * C + c] : a.state[size_t(K - 1 + u) * C + c];
        s = s + a.weight[size_t(c) * K + j] * x;
      }
      out[c] = fixed_exp::silu(s);
    }
  }
}

}  // namespace HWY_NAMESPACE
}  // namespace dflash
HWY_AFTER_NAMESPACE();

#if HWY_ONCE
namespace dflash {
HWY_EXPORT(CausalConvSilu);
HWY_EXPORT(FixedExpRow);

void causal_conv_silu(const ShortConvArgs& a) { HWY_DYNAMIC_DISPATCH(CausalConvSilu)(a); }
void fixed_exp_row(const float* x, int n, float* y) { HWY_DYNAMIC_DISPATCH(FixedExpRow)(x, n, y); }

}  // namespace dflash
#endif
