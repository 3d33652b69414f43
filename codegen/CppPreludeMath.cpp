// The math part of the generated sources' prelude (see CppPrelude.h). libm's functions are
// scalar calls that stop a loop from vectorizing (std::tanh: ~30 ns per element), so exp, expm1,
// log, log1p and tanh are written here branch-free (selects only, which GCC if-converts under
// -fno-trapping-math) and inline; the others use glibc's libmvec vector variants.
#include "codegen/CppPrelude.h"
#include <cstdint>

namespace kiln::codegen {

// Measured against numpy/mpmath on dense grids, 0, subnormals, +-inf, NaN and huge arguments
// (test/python/test_cpp_math.py asserts the bounds): double exp, log, log1p <= 1 ulp, expm1
// <= 2 ulp, tanh <= 3 ulp; float expf, logf, log1pf <= 1 ulp, expm1f <= 1.4 ulp, tanhf <= 2 ulp;
// libmvec's functions <= 4 ulp (glibc's documented bound).
const std::string& cppPreludeMath() {
  static const std::string text = R"CPP(
// exp for float in branch-free code the compiler vectorizes inside `omp simd` loops (std::exp
// is a scalar libm call): e^x = 2^n * e^r with n = round(x / ln 2), |r| <= ln(2) / 2, and
// Cephes' polynomial for e^r (within 2 ulp of the correctly rounded result), evaluated with
// FMAs. 2^n is applied as two normal factors so that subnormal results round once. Where the
// result is 0 (x <= -104), infinite or NaN, x is replaced by 0 before the polynomial (no
// subnormal arithmetic: a masked softmax's -inf lanes took a microcode assist each, the masked
// attention kernel ran 3x slower than eager) and the result is fixed after it. The two range
// tests are written as all-ones masks ANDed into the bits: as nested selects, GCC 12 combined
// them into 17 vector ops of compares, ands and blends (46 ops a vector in a sum of exps; 36
// with masks: the sum 20% faster on Zen 3).
static inline float kiln_expf(float x) {
  const uint32_t lo = 0u - uint32_t(x > -104.0f);      // all ones unless the result is 0 (or NaN)
  const uint32_t hi = 0u - uint32_t(x <= 88.7228394f); // all ones unless it is inf (or NaN)
  const float xc = kiln_f32_from_bits(kiln_f32_bits(x) & lo & hi);
  const float fn = __builtin_fmaf(xc, 1.44269504088896341f, 12582912.0f) - 12582912.0f; // round
  float r = __builtin_fmaf(fn, -0.693359375f, xc);
  r = __builtin_fmaf(fn, 2.12194440e-4f, r);
  float p = 1.9875691500e-4f;
  p = __builtin_fmaf(p, r, 1.3981999507e-3f);
  p = __builtin_fmaf(p, r, 8.3334519073e-3f);
  p = __builtin_fmaf(p, r, 4.1665795894e-2f);
  p = __builtin_fmaf(p, r, 1.6666665459e-1f);
  p = __builtin_fmaf(p, r, 5.0000001201e-1f);
  p = __builtin_fmaf(p, r * r, r) + 1.0f;
  const int32_t n = static_cast<int32_t>(fn);
  const int32_t n1 = n >> 1;
  const float result = p * kiln_f32_from_bits(uint32_t(n1 + 127) << 23) *
                       kiln_f32_from_bits(uint32_t(n - n1 + 127) << 23);
  // 0 below -104; inf above 88.72 and NaN for NaN (x + inf).
  const float finite = kiln_f32_from_bits(kiln_f32_bits(result) & lo);
  return hi ? finite : x + __builtin_inff();
}

static inline uint64_t kiln_f64_bits(double d) {
  uint64_t u;
  __builtin_memcpy(&u, &d, sizeof u);
  return u;
}
static inline double kiln_f64_from_bits(uint64_t u) {
  double d;
  __builtin_memcpy(&d, &u, sizeof d);
  return d;
}
// e^x for double: n = round(x / ln 2), r = x - n ln 2 (two-part ln 2, FMA), e^r by its Taylor
// series to r^13 (|r| <= 0.35: truncation below 2^-60), times 2^n as two normal factors so
// that subnormal results round once.
static inline double kiln_exp(double x) {
  double xc = x > 709.8 ? 709.8 : x;
  xc = xc < -746.0 ? -746.0 : xc;
  xc = xc != xc ? 0.0 : xc;
  const double fn = (xc * 1.4426950408889634 + 6755399441055744.0) - 6755399441055744.0; // round to nearest
  double r = __builtin_fma(fn, -6.93147180369123816490e-01, xc);
  r = __builtin_fma(fn, -1.90821492927058770002e-10, r);
  double p = 1.6059043836821613e-10;
  p = __builtin_fma(p, r, 2.08767569878680990e-09);
  p = __builtin_fma(p, r, 2.50521083854417188e-08);
  p = __builtin_fma(p, r, 2.75573192239858907e-07);
  p = __builtin_fma(p, r, 2.75573192239858907e-06);
  p = __builtin_fma(p, r, 2.48015873015873016e-05);
  p = __builtin_fma(p, r, 1.98412698412698413e-04);
  p = __builtin_fma(p, r, 1.38888888888888889e-03);
  p = __builtin_fma(p, r, 8.33333333333333333e-03);
  p = __builtin_fma(p, r, 4.16666666666666667e-02);
  p = __builtin_fma(p, r, 1.66666666666666667e-01);
  p = __builtin_fma(p, r, 0.5);
  p = __builtin_fma(p, r * r, r) + 1.0;
  // |n| <= 1077: int32 conversions and shifts, which AVX2 vectorizes (a double -> int64
  // conversion needs AVX-512DQ: with it the loop stayed scalar on AVX2-only CPUs).
  const int32_t n = static_cast<int32_t>(fn);
  const int32_t n1 = n >> 1;
  const double result = p * kiln_f64_from_bits(uint64_t(int64_t(n1 + 1023)) << 52) *
                        kiln_f64_from_bits(uint64_t(int64_t(n - n1 + 1023)) << 52);
  return x != x ? x : (x > 709.782712893384 ? __builtin_inf() : result);
}
// e^x - 1 for double without cancellation near 0, for finite -60 <= x <= 700: x = n ln 2 + r,
// e^r - 1 by its Taylor series (no constant term), then 2^n (e^r - 1) + (2^n - 1) in one FMA.
static inline double kiln_expm1_core(double x) {
  const double fn = (x * 1.4426950408889634 + 6755399441055744.0) - 6755399441055744.0;
  double r = __builtin_fma(fn, -6.93147180369123816490e-01, x);
  r = __builtin_fma(fn, -1.90821492927058770002e-10, r);
  double p = 1.1470745597729725e-11;
  p = __builtin_fma(p, r, 1.6059043836821613e-10);
  p = __builtin_fma(p, r, 2.08767569878680990e-09);
  p = __builtin_fma(p, r, 2.50521083854417188e-08);
  p = __builtin_fma(p, r, 2.75573192239858907e-07);
  p = __builtin_fma(p, r, 2.75573192239858907e-06);
  p = __builtin_fma(p, r, 2.48015873015873016e-05);
  p = __builtin_fma(p, r, 1.98412698412698413e-04);
  p = __builtin_fma(p, r, 1.38888888888888889e-03);
  p = __builtin_fma(p, r, 8.33333333333333333e-03);
  p = __builtin_fma(p, r, 4.16666666666666667e-02);
  p = __builtin_fma(p, r, 1.66666666666666667e-01);
  p = __builtin_fma(p, r, 0.5);
  const double er = __builtin_fma(p * r, r, r); // e^r - 1
  const double two_n = kiln_f64_from_bits(uint64_t(int64_t(static_cast<int32_t>(fn) + 1023)) << 52); // int32: see kiln_exp
  return __builtin_fma(two_n, er, two_n - 1.0);
}
// Beyond 700 the -1 does not matter: e^x. Below -60 the result rounds to -1.
static inline double kiln_expm1(double x) {
  double xc = x > 700.0 ? 700.0 : x;
  xc = xc < -60.0 ? -60.0 : xc;
  xc = xc != xc ? 0.0 : xc;
  const double result = kiln_expm1_core(xc);
  return ((x != x) | (x == 0.0)) ? x : (x > 700.0 ? kiln_exp(x) : result);
}
// log(m * 2^e) for finite x > 0 (fdlibm's e_log.c without branches): m in [sqrt(2)/2,
// sqrt(2)), f = m - 1 exactly, s = f / (2 + f), log(1 + f) = f - (f^2/2 - s (f^2/2 + R(s^2))).
// `c` is added before the final rounding (log1p's correction for the rounding of 1 + x).
static inline double kiln_log_core(double x, double c) {
  const bool sub = x < 2.2250738585072014e-308;
  const double xs = sub ? x * 18014398509481984.0 : x; // 2^54
  const uint64_t u = kiln_f64_bits(xs);
  // The exponent field as a double without an int64 -> double conversion (AVX-512DQ only: with
  // it the loop stayed scalar on AVX2-only CPUs): 2^52 + field, minus 2^52, is exact.
  double e = kiln_f64_from_bits((u >> 52) | UINT64_C(0x4330000000000000)) - 4503599627370496.0;
  e -= sub ? 1077.0 : 1023.0;
  double m = kiln_f64_from_bits((u & UINT64_C(0x000FFFFFFFFFFFFF)) | UINT64_C(0x3FF0000000000000));
  const bool high = m > 1.4142135623730951;
  m = high ? m * 0.5 : m;
  e = high ? e + 1.0 : e;
  const double f = m - 1.0;
  const double s = f / (2.0 + f);
  const double z = s * s;
  double R = 1.479819860511658591e-01;
  R = __builtin_fma(R, z, 1.531383769920937332e-01);
  R = __builtin_fma(R, z, 1.818357216161805012e-01);
  R = __builtin_fma(R, z, 2.222219843214978396e-01);
  R = __builtin_fma(R, z, 2.857142874366239149e-01);
  R = __builtin_fma(R, z, 3.999999999940941908e-01);
  R = __builtin_fma(R, z, 6.666666666666735130e-01);
  R *= z;
  const double hfsq = 0.5 * f * f;
  const double de = e;
  return de * 6.93147180369123816490e-01 -
         ((hfsq - (s * (hfsq + R) + (de * 1.90821492927058770002e-10 + c))) - f);
}
static inline double kiln_log(double x) {
  const double r = kiln_log_core((x > 0.0) & (x != __builtin_inf()) ? x : 1.0, 0.0);
  return x != x ? x
         : x < 0.0 ? __builtin_nan("")
         : x == 0.0 ? -__builtin_inf()
         : x == __builtin_inf() ? x : r;
}
// log(1 + x): log of u = 1 + x (rounded) plus the rounding error of u divided by u, fdlibm's
// correction.
static inline double kiln_log1p(double x) {
  const bool ok = (x > -1.0) & (x < __builtin_inf());
  const double xo = ok ? x : 0.0;
  const double u = 1.0 + xo;
  const double c = (u > 2.0 ? 1.0 - (u - xo) : xo - (u - 1.0)) / u;
  const double r = kiln_log_core(u, c);
  return ((x != x) | (x == 0.0)) ? x
         : x < -1.0 ? __builtin_nan("")
         : x == -1.0 ? -__builtin_inf()
         : x == __builtin_inf() ? x : r;
}
// tanh(x) = sign(x) t / (t + 2) with t = e^(2|x|) - 1 (no cancellation near 0); |x| >= 22
// rounds to 1.
static inline double kiln_tanh(double x) {
  double a = __builtin_fabs(x);
  a = a > 22.0 ? 22.0 : a;
  a = a != a ? 0.0 : a;
  const double t = kiln_expm1_core(2.0 * a);
  const double r = __builtin_copysign(t / (t + 2.0), x);
  return x != x ? x : r;
}
// log for float in float arithmetic: kiln_log_core's algorithm with FreeBSD e_logf.c's
// coefficients (|error of R| < 2^-34) and float splits of ln 2.
static inline float kiln_logf_core(float x, float c) {
  const bool sub = x < 1.17549435e-38f;
  const float xs = sub ? x * 33554432.0f : x; // 2^25
  const uint32_t u = kiln_f32_bits(xs);
  int32_t e = int32_t(u >> 23) - 127 - (sub ? 25 : 0);
  float m = kiln_f32_from_bits((u & UINT32_C(0x007FFFFF)) | UINT32_C(0x3F800000));
  const bool high = m > 1.41421354f;
  m = high ? m * 0.5f : m;
  e = high ? e + 1 : e;
  const float f = m - 1.0f;
  const float s = f / (2.0f + f);
  const float z = s * s;
  float R = 0.24279078841f;
  R = __builtin_fmaf(R, z, 0.28498786688f);
  R = __builtin_fmaf(R, z, 0.40000972152f);
  R = __builtin_fmaf(R, z, 0.66666662693f);
  R *= z;
  const float hfsq = 0.5f * f * f;
  const float de = static_cast<float>(e);
  return de * 6.9313812256e-01f - ((hfsq - (s * (hfsq + R) + (de * 9.0580006145e-06f + c))) - f);
}
static inline float kiln_logf(float x) {
  const float r = kiln_logf_core((x > 0.0f) & (x != __builtin_inff()) ? x : 1.0f, 0.0f);
  return x != x ? x
         : x < 0.0f ? __builtin_nanf("")
         : x == 0.0f ? -__builtin_inff()
         : x == __builtin_inff() ? x : r;
}
static inline float kiln_log1pf(float x) {
  const bool ok = (x > -1.0f) & (x < __builtin_inff());
  const float xo = ok ? x : 0.0f;
  const float u = 1.0f + xo;
  const float c = (u > 2.0f ? 1.0f - (u - xo) : xo - (u - 1.0f)) / u;
  const float r = kiln_logf_core(u, c);
  return ((x != x) | (x == 0.0f)) ? x
         : x < -1.0f ? __builtin_nanf("")
         : x == -1.0f ? -__builtin_inff()
         : x == __builtin_inff() ? x : r;
}
// e^y - 1 in float arithmetic (twice the lanes of the double route) for -18 <= y <= 88:
// n = round(y / ln 2) <= 127, e^r - 1 by its Taylor series to r^8 (|r| <= 0.35: below 2^-27
// relative), then 2^n (e^r - 1) + (2^n - 1) in one FMA.
static inline float kiln_expm1f_core(float y) {
  const float fn = (y * 1.44269504088896341f + 12582912.0f) - 12582912.0f;
  float r = __builtin_fmaf(fn, -0.693359375f, y);
  r = __builtin_fmaf(fn, 2.12194440e-4f, r);
  float p = 2.4801587e-5f;
  p = __builtin_fmaf(p, r, 1.9841270e-4f);
  p = __builtin_fmaf(p, r, 1.3888889e-3f);
  p = __builtin_fmaf(p, r, 8.3333333e-3f);
  p = __builtin_fmaf(p, r, 4.1666668e-2f);
  p = __builtin_fmaf(p, r, 1.6666667e-1f);
  p = __builtin_fmaf(p, r, 0.5f);
  const float er = __builtin_fmaf(p * r, r, r);
  const float two_n = kiln_f32_from_bits(uint32_t(static_cast<int32_t>(fn) + 127) << 23);
  return __builtin_fmaf(two_n, er, two_n - 1.0f);
}
// Below -18 the result rounds to -1; above 88 the -1 does not matter (e^x, which scales in two
// steps up to the overflow threshold).
static inline float kiln_expm1f(float x) {
  float xc = x > 88.0f ? 88.0f : x;
  xc = xc < -18.0f ? -18.0f : xc;
  xc = xc != xc ? 0.0f : xc;
  const float result = kiln_expm1f_core(xc);
  return ((x != x) | (x == 0.0f)) ? x : (x > 88.0f ? kiln_expf(x) : result);
}
// tanh(x) = sign(x) t / (t + 2) with t = e^(2|x|) - 1; |x| >= 9 rounds to 1.
static inline float kiln_tanhf(float x) {
  float a = __builtin_fabsf(x);
  a = a > 9.0f ? 9.0f : a;
  a = a != a ? 0.0f : a;
  const float t = kiln_expm1f_core(2.0f * a);
  const float result = __builtin_copysignf(t / (t + 2.0f), x);
  return x != x ? x : result;
}

// glibc's libmvec: vector variants of libm functions (_ZGVdN8v_sinf, ...) that GCC calls for
// a function declared `simd` when it vectorizes a loop; the scalar symbol serves the rest.
#define KILN_LIBMVEC1(name)                                                                       \
  __attribute__((simd("notinbranch"), const, nothrow)) double kiln_v##name(double) __asm__(#name); \
  __attribute__((simd("notinbranch"), const, nothrow)) float kiln_v##name##f(float) __asm__(#name "f");
#define KILN_LIBMVEC2(name)                                                                       \
  __attribute__((simd("notinbranch"), const, nothrow)) double kiln_v##name(double, double)        \
      __asm__(#name);                                                                             \
  __attribute__((simd("notinbranch"), const, nothrow)) float kiln_v##name##f(float, float)        \
      __asm__(#name "f");
extern "C" {
KILN_LIBMVEC1(exp2) KILN_LIBMVEC1(log2) KILN_LIBMVEC1(sin) KILN_LIBMVEC1(cos) KILN_LIBMVEC1(tan)
KILN_LIBMVEC1(asin) KILN_LIBMVEC1(acos) KILN_LIBMVEC1(atan) KILN_LIBMVEC1(sinh)
KILN_LIBMVEC1(cosh) KILN_LIBMVEC1(erf) KILN_LIBMVEC2(atan2) KILN_LIBMVEC2(pow)
}
)CPP";
  return text;
}

} // namespace kiln::codegen
