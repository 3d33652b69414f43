// The eager kernels' vectorizable math: the functions of the generated code's prelude
// (KilnMath.inc: branch-free exp, expm1, log, log1p, tanh in float and double, libmvec's vector
// variants of the other libm functions), one set for both, plus typed wrappers that pick the
// float or double version. libm's scalar calls keep a loop scalar (std::exp ~7 ns an element);
// these vectorize with AVX2 as with AVX-512.
//
// A file calling them must be compiled with -fno-trapping-math (runtime/CMakeLists.txt lists
// them): without it GCC does not if-convert the selects of the branch-free code and every
// loop that calls it stays scalar (exp over 512x1024 floats: 3.9 ms scalar, 0.4 ms vectorized
// on Zen 3 AVX2). The flag changes no value the kernels compute (they read no FP exception
// flags), except that GCC then folds float(int(x)) into trunc(x) (-0.0 for x in (-1, 0)):
// those files convert float -> int -> float nowhere.
#pragma once
#include <cstdint>
#include <type_traits>

namespace kiln::cpu::math {

static inline uint32_t kiln_f32_bits(float f) {
  uint32_t u;
  __builtin_memcpy(&u, &f, sizeof u);
  return u;
}
static inline float kiln_f32_from_bits(uint32_t u) {
  float f;
  __builtin_memcpy(&f, &u, sizeof f);
  return f;
}

#include "runtime/cpu/KilnMath.inc"

// The typed entry points: float or double (the opmath types) to the shared functions.
template <typename M> inline M exp(M x) {
  if constexpr (std::is_same_v<M, float>) return kiln_expf(x);
  else return kiln_exp(x);
}
template <typename M> inline M expm1(M x) {
  if constexpr (std::is_same_v<M, float>) return kiln_expm1f(x);
  else return kiln_expm1(x);
}
template <typename M> inline M log(M x) {
  if constexpr (std::is_same_v<M, float>) return kiln_logf(x);
  else return kiln_log(x);
}
template <typename M> inline M log1p(M x) {
  if constexpr (std::is_same_v<M, float>) return kiln_log1pf(x);
  else return kiln_log1p(x);
}
template <typename M> inline M tanh(M x) {
  if constexpr (std::is_same_v<M, float>) return kiln_tanhf(x);
  else return kiln_tanh(x);
}
#define KILN_MATH_LIBMVEC1(name)                                                                   \
  template <typename M> inline M name(M x) {                                                       \
    if constexpr (std::is_same_v<M, float>) return kiln_v##name##f(x);                             \
    else return kiln_v##name(x);                                                                   \
  }
KILN_MATH_LIBMVEC1(exp2)
KILN_MATH_LIBMVEC1(log2)
KILN_MATH_LIBMVEC1(log10)
KILN_MATH_LIBMVEC1(sin)
KILN_MATH_LIBMVEC1(cos)
KILN_MATH_LIBMVEC1(tan)
KILN_MATH_LIBMVEC1(asin)
KILN_MATH_LIBMVEC1(acos)
KILN_MATH_LIBMVEC1(atan)
KILN_MATH_LIBMVEC1(sinh)
KILN_MATH_LIBMVEC1(cosh)
KILN_MATH_LIBMVEC1(erf)
#undef KILN_MATH_LIBMVEC1
template <typename M> inline M atan2(M y, M x) {
  if constexpr (std::is_same_v<M, float>) return kiln_vatan2f(y, x);
  else return kiln_vatan2(y, x);
}
template <typename M> inline M pow(M x, M y) {
  if constexpr (std::is_same_v<M, float>) return kiln_vpowf(x, y);
  else return kiln_vpow(x, y);
}

// erf as PyTorch's vectorized float kernel computes it for gelu (Abramowitz-Stegun 7.1.26,
// absolute error below 1.5e-7); double gelu uses erf.
template <typename M> inline M erfGelu(M x) {
  if constexpr (std::is_same_v<M, float>) {
    float a = x < 0 ? -x : x;
    float t = 1.0f / (0.3275911f * a + 1.0f);
    float r = 1.061405429f;
    r = r * t - 1.453152027f;
    r = r * t + 1.421413741f;
    r = r * t - 0.284496736f;
    r = r * t + 0.254829592f;
    float y = 1.0f - r * t * kiln_expf(-x * x);
    return x < 0 ? -y : y;
  } else {
    return erf(x);
  }
}

} // namespace kiln::cpu::math
