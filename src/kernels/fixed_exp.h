#pragma once
// exp(x) as a fixed sequence of float operations, so that a SIMD kernel and its plain twin
// give the same bits (a library exp differs between its scalar and vector forms, and between
// libraries). Definition, every product and sum rounded separately (no FMA):
//   x := x > -87 ? x : -87;  x := x < 88 ? x : 88          (NaN becomes -87)
//   n := (x * log2(e) + 12582912) - 12582912                  (round to nearest, |n| <= 127)
//   r := (x - n * 0.693359375) - n * -2.12194440e-4          (Cody-Waite, ln 2 = hi + lo)
//   p := ((((c5 * r + c4) * r + c3) * r + c2) * r + c1) * r + c0;  e := (p * (r * r) + r) + 1
//   exp(x) := e * 2^n                                         (2^n from its exponent bits)
// with the Cephes expf coefficients c0..c5 below. Relative error about 2e-7 over the range.
// The Highway form is in kernels/cpu/gated_delta_conv_hwy.cpp; the unit test holds the two
// to the same bits.
#include <cstdint>
#include <cstring>

namespace dflash::fixed_exp {

constexpr float kLo = -87.0f, kHi = 88.0f, kLog2e = 1.44269504088896341f, kRound = 12582912.0f;
constexpr float kLn2Hi = 0.693359375f, kLn2Lo = -2.12194440e-4f;
constexpr float kC5 = 1.9875691500e-4f, kC4 = 1.3981999507e-3f, kC3 = 8.3334519073e-3f, kC2 = 4.1665795894e-2f,
                kC1 = 1.6666665459e-1f, kC0 = 5.0000001201e-1f;

inline float exp(float x) {
  x = x > kLo ? x : kLo;
  x = x < kHi ? x : kHi;
  const float n = (x * kLog2e + kRound) - kRound;
  const float r = (x - n * kLn2Hi) - n * kLn2Lo;
  const float p = ((((kC5 * r + kC4) * r + kC3) * r + kC2) * r + kC1) * r + kC0;
  const float e = (p * (r * r) + r) + 1.0f;
  const int32_t bits = (int32_t(n) + 127) << 23;
  float scale;
  std::memcpy(&scale, &bits, sizeof scale);
  return e * scale;
}

// silu(s) = s / (1 + exp(-s)), with the exp above.
inline float silu(float s) { return s / (1.0f + exp(-s)); }

}  // namespace dflash::fixed_exp
