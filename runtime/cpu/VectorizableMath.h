// Branch-free scalar math that the compiler vectorizes inside lane loops: float16/bfloat16 to
// float conversion and exp. (GCC 12 converts _Float16 one element at a time and calls libm's
// exp per element; these keep reductions and softmax on vector instructions.)
#pragma once
#include <bit>
#include <cmath>
#include <cstdint>

#include "runtime/ScalarType.h"

namespace kiln::cpu {

// x as its opmath type (float for the 16-bit floats, itself otherwise), exactly.
template <typename T> inline opmath_t<T> toOpmath(T x) {
  if constexpr (std::is_same_v<T, Half>) {
    // Shifting exponent and mantissa into float position and scaling by 2^(127 - 15) rebiases
    // normal and subnormal halves alike; inf and NaN keep an all-ones exponent.
    uint32_t magnitude = x.bits & 0x7FFFu;
    float scaled = std::bit_cast<float>(magnitude << 13) * 0x1p112f;
    uint32_t bits = magnitude >= 0x7C00u ? (magnitude << 13) | 0x7F800000u : std::bit_cast<uint32_t>(scaled);
    return std::bit_cast<float>(bits | (uint32_t(x.bits & 0x8000u) << 16));
  } else if constexpr (std::is_same_v<T, BFloat16>) {
    return std::bit_cast<float>(uint32_t(x.bits) << 16);
  } else {
    return x;
  }
}

// e^x for float within about 1 ulp (Cephes' expf polynomial), with gradual underflow, inf
// and NaN as std::exp gives them.
inline float expVectorizable(float x) {
  float clamped = x > 89.0f ? 89.0f : (x < -104.0f ? -104.0f : x);
  float n = std::nearbyint(clamped * 1.44269504088896341f);
  float r = clamped - n * 0.693359375f + n * 2.12194440e-4f;
  float p = 1.9875691500e-4f;
  p = p * r + 1.3981999507e-3f;
  p = p * r + 8.3334519073e-3f;
  p = p * r + 4.1665795894e-2f;
  p = p * r + 1.6666665459e-1f;
  p = p * r + 5.0000001201e-1f;
  p = p * r * r + r + 1.0f;
  // 2^n in two factors so that n below -126 (subnormal results) and up to 128 stay exact.
  int32_t ni = int32_t(n);
  int32_t half = ni >> 1;
  float scale1 = std::bit_cast<float>(uint32_t(half + 127) << 23);
  float scale2 = std::bit_cast<float>(uint32_t(ni - half + 127) << 23);
  float result = p * scale1 * scale2;
  return x != x ? x : result;
}

// exp in T's opmath type: the fast float version, libm for double.
template <typename M> inline M expOpmath(M x) {
  if constexpr (std::is_same_v<M, float>) return expVectorizable(x);
  else return std::exp(x);
}

} // namespace kiln::cpu
