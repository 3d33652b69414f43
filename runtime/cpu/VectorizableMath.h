// Branch-free scalar math that the compiler vectorizes inside lane loops: float16/bfloat16 to
// float conversion (GCC 12 converts _Float16 one element at a time) and exp in the opmath type
// (KilnMath.h's), for the reduction, softmax and normalization kernels.
#pragma once
#include <bit>
#include <cmath>
#include <cstdint>

#include "runtime/ScalarType.h"
#include "runtime/cpu/KilnMath.h"

namespace kiln::cpu {

// x as its opmath type (float for the 16-bit floats, itself otherwise), exactly.
template <typename T> inline opmath_t<T> toOpmath(T x) {
  if constexpr (std::is_same_v<T, Half>) {
    // Shifting exponent and mantissa into float position and scaling by 2^(127 - 15) rebiases
    // normal and subnormal halves alike; inf and NaN keep an all-ones exponent.
    uint32_t magnitude = x.bits & 0x7FFFu;
    float scaled = std::bit_cast<float>(magnitude << 13) * 0x1p112f;
    uint32_t bits = magnitude >= 0x7C00u ? (magnitude << 13) | 0x7F800000u
                                         : std::bit_cast<uint32_t>(scaled);
    return std::bit_cast<float>(bits | (uint32_t(x.bits & 0x8000u) << 16));
  } else if constexpr (std::is_same_v<T, BFloat16>) {
    return std::bit_cast<float>(uint32_t(x.bits) << 16);
  } else {
    return x;
  }
}

// exp in an opmath type (float or double), vectorizable (in files compiled with
// -fno-trapping-math: see KilnMath.h).
template <typename M> inline M expOpmath(M x) { return math::exp(x); }

} // namespace kiln::cpu
