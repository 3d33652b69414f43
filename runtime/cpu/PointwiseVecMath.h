// float32 exp, expm1, log1p, tanh and erf written with arithmetic and bit operations only, so
// that the compiler vectorizes the loops that call them (libm's expf/tanhf are opaque calls, and
// glibc's expm1f/log1pf take ~20 ns each). Accuracy: exp within 2 ulp, log1p within 2.5 ulp,
// tanh and expm1 within 3.5 ulp; gelu's erf is the Abramowitz-Stegun form PyTorch's vectorized
// kernel uses (absolute error below 1.5e-7). Every selection is a select, never a branch.
#pragma once
#include <bit>
#include <cstdint>
#include <limits>

namespace kiln::cpu::vec {

// Round to nearest (ties to even) for |x| < 2^22, by adding and removing 1.5 * 2^23.
inline float roundSmall(float x) {
  constexpr float magic = 12582912.0f;
  return (x + magic) - magic;
}

// 2^n for integral n in [-126, 127], built from the exponent bits.
inline float pow2(float n) { return std::bit_cast<float>((static_cast<int32_t>(n) + 127) << 23); }

// e^x: x = n ln2 + r with |r| <= ln2/2 (Cody-Waite), e^r by Cephes' polynomial, times 2^n in
// two factors so that results down to the smallest subnormal round once.
inline float exp(float x) {
  constexpr float maxArg = 88.72283935546875f;   // above: inf
  constexpr float minArg = -103.97208404541016f; // below: 0
  float xc = x < minArg ? minArg : (x > maxArg ? maxArg : x);
  float n = roundSmall(xc * 1.44269504088896341f);
  float r = xc - n * 0.693359375f;
  r = r - n * -2.12194440e-4f;
  float p = 1.9875691500e-4f;
  p = p * r + 1.3981999507e-3f;
  p = p * r + 8.3334519073e-3f;
  p = p * r + 4.1665795894e-2f;
  p = p * r + 1.6666665459e-1f;
  p = p * r + 5.0000001201e-1f;
  p = p * r * r + r + 1.0f;
  float half = roundSmall(n * 0.5f - 0.25f); // floor(n / 2) for integral n
  float result = p * pow2(half) * pow2(n - half);
  if (x > maxArg) result = std::numeric_limits<float>::infinity();
  if (x < minArg) result = 0.0f;
  return x != x ? x : result;
}

// e^x - 1: Cephes' polynomial for |x| <= 0.5 (no cancellation there), exp(x) - 1 above.
inline float expm1(float x) {
  float p = 1.9618793909e-4f;
  p = p * x + 1.3888397e-3f;
  p = p * x + 8.3333076e-3f;
  p = p * x + 4.1666642e-2f;
  p = p * x + 1.6666667e-1f;
  p = p * x + 5.0e-1f;
  float small = p * (x * x) + x;
  float a = x < 0 ? -x : x;
  float r = a <= 0.5f ? small : exp(x) - 1.0f;
  return x == 0.0f ? x : r; // keeps -0
}

// log(u) for a positive normal finite u: u = m 2^e with m in [sqrt(1/2), sqrt(2)), Cephes'
// polynomial in m - 1, ln2 split in two for e. Other inputs give a meaningless finite value.
inline float logNormal(float u) {
  int32_t bits = std::bit_cast<int32_t>(u);
  float e = static_cast<float>(((bits >> 23) & 0xff) - 126);
  float m = std::bit_cast<float>((bits & 0x007fffff) | 0x3f000000); // in [0.5, 1)
  bool below = m < 0.707106781186547524f;
  e = below ? e - 1.0f : e;
  m = below ? m + m - 1.0f : m - 1.0f;
  float z = m * m;
  float y = 7.0376836292e-2f;
  y = y * m - 1.1514610310e-1f;
  y = y * m + 1.1676998740e-1f;
  y = y * m - 1.2420140846e-1f;
  y = y * m + 1.4249322787e-1f;
  y = y * m - 1.6668057665e-1f;
  y = y * m + 2.0000714765e-1f;
  y = y * m - 2.4999993993e-1f;
  y = y * m + 3.3333331174e-1f;
  y = y * m * z - 2.12194440e-4f * e - 0.5f * z;
  return m + y + 0.693359375f * e;
}

// log(1 + x) = log(u) * x / (u - 1) with u = fl(1 + x): the factor undoes the rounding of u
// (Goldberg); x itself where u rounds to 1. u is never subnormal (1 + x is exact near -1).
inline float log1p(float x) {
  constexpr float inf = std::numeric_limits<float>::infinity();
  float u = 1.0f + x;
  float d = u - 1.0f;
  float r = logNormal(u) * (x / (d == 0.0f ? 1.0f : d));
  r = d == 0.0f ? x : r;
  r = u == 0.0f ? -inf : r;
  r = u < 0.0f ? std::numeric_limits<float>::quiet_NaN() : r;
  return u == inf ? inf : r;
}

// tanh: Cephes' odd polynomial for |x| < 0.625, 1 - 2 / (e^{2|x|} + 1) above (sign restored).
inline float tanh(float x) {
  float a = x < 0 ? -x : x;
  float e = exp(2.0f * a);
  float big = 1.0f - 2.0f / (e + 1.0f);
  big = x < 0 ? -big : big;
  float z = x * x;
  float p = -5.70498872745e-3f;
  p = p * z + 2.06390887954e-2f;
  p = p * z - 5.37397155531e-2f;
  p = p * z + 1.33314422036e-1f;
  p = p * z - 3.33332819422e-1f;
  float small = x + x * z * p;
  return a < 0.625f ? small : big;
}

// erf as PyTorch's vectorized float kernel computes it (used by gelu only; erf itself calls
// libm for full relative accuracy near 0).
inline float erfGelu(float x) {
  float a = x < 0 ? -x : x;
  float t = 1.0f / (0.3275911f * a + 1.0f);
  float r = 1.061405429f;
  r = r * t - 1.453152027f;
  r = r * t + 1.421413741f;
  r = r * t - 0.284496736f;
  r = r * t + 0.254829592f;
  float y = 1.0f - r * t * exp(-x * x);
  return x < 0 ? -y : y;
}

} // namespace kiln::cpu::vec
