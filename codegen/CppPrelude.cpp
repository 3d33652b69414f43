// The fixed head of generated C++ sources (see CppPrelude.h). It is plain C++17 with standard
// headers only, so a generated source compiles without kiln's headers or libraries.
#include "codegen/CppPrelude.h"

namespace kiln::codegen {

const std::string& cppPrelude() {
  static const std::string text = R"CPP(#include <algorithm>
#include <cmath>
#include <cstddef>
#include <cstdint>
#include <cstring>
#include <limits>
#include <type_traits>
#ifdef _OPENMP
#include <omp.h>
#endif

// What the caller provides: an allocator for intermediate buffers and the BLAS GEMMs
// (cblas_sgemm / cblas_dgemm: row-major = 101, no transpose = 111, transpose = 112).
struct KilnContext {
  void* (*alloc)(size_t bytes);
  void (*free)(void* ptr);
  void (*sgemm)(int order, int trans_a, int trans_b, int m, int n, int k, float alpha,
                const float* a, int lda, const float* b, int ldb, float beta, float* c, int ldc);
  void (*dgemm)(int order, int trans_a, int trans_b, int m, int n, int k, double alpha,
                const double* a, int lda, const double* b, int ldb, double beta, double* c,
                int ldc);
  int num_threads; // <= 0: OpenMP's default
};

static inline int kiln_num_threads(const KilnContext* ctx) {
#ifdef _OPENMP
  return ctx->num_threads > 0 ? ctx->num_threads : omp_get_max_threads();
#else
  (void)ctx;
  return 1;
#endif
}

static inline uint32_t kiln_f32_bits(float f) {
  uint32_t u;
  std::memcpy(&u, &f, sizeof u);
  return u;
}
static inline float kiln_f32_from_bits(uint32_t u) {
  float f;
  std::memcpy(&f, &u, sizeof f);
  return f;
}
// IEEE half <-> float, bit-exact with round-to-nearest-even (the FP16 library's algorithm,
// which PyTorch's c10::Half uses).
static inline float kiln_h2f(uint16_t h) {
  const uint32_t w = uint32_t(h) << 16;
  const uint32_t sign = w & UINT32_C(0x80000000);
  const uint32_t two_w = w + w;
  const float normalized = kiln_f32_from_bits((two_w >> 4) + (UINT32_C(0xE0) << 23)) * 0x1.0p-112f;
  const float denormalized = kiln_f32_from_bits((two_w >> 17) | (UINT32_C(126) << 23)) - 0.5f;
  const uint32_t bits = two_w < (UINT32_C(1) << 27) ? kiln_f32_bits(denormalized)
                                                    : kiln_f32_bits(normalized);
  return kiln_f32_from_bits(sign | bits);
}
static inline uint16_t kiln_f2h(float f) {
  float base = (std::fabs(f) * 0x1.0p+112f) * 0x1.0p-110f;
  const uint32_t w = kiln_f32_bits(f);
  const uint32_t shl1_w = w + w;
  const uint32_t sign = w & UINT32_C(0x80000000);
  uint32_t bias = shl1_w & UINT32_C(0xFF000000);
  if (bias < UINT32_C(0x71000000)) bias = UINT32_C(0x71000000);
  base = kiln_f32_from_bits((bias >> 1) + UINT32_C(0x07800000)) + base;
  const uint32_t bits = kiln_f32_bits(base);
  const uint32_t nonsign = ((bits >> 13) & UINT32_C(0x00007C00)) + (bits & UINT32_C(0x00000FFF));
  return uint16_t((sign >> 16) | (shl1_w > UINT32_C(0xFF000000) ? UINT32_C(0x7E00) : nonsign));
}
// bfloat16 <-> float, round-to-nearest-even like c10::BFloat16.
static inline float kiln_bf2f(uint16_t b) { return kiln_f32_from_bits(uint32_t(b) << 16); }
static inline uint16_t kiln_f2bf(float f) {
  if (f != f) return UINT16_C(0x7FC0);
  const uint32_t u = kiln_f32_bits(f);
  return uint16_t((u + UINT32_C(0x7FFF) + ((u >> 16) & 1u)) >> 16);
}
// A float rounded to the nearest half / bfloat16 (the value a 16-bit result holds).
static inline float kiln_round_h(float f) { return kiln_h2f(kiln_f2h(f)); }
static inline float kiln_round_bf(float f) { return kiln_bf2f(kiln_f2bf(f)); }

// exp for float in branch-free code the compiler vectorizes inside `omp simd` loops (std::exp
// is a scalar libm call): e^x = 2^n * e^r with n = round(x / ln 2), |r| <= ln(2) / 2, and
// Cephes' polynomial for e^r (within 2 ulp of the correctly rounded result). 2^n is applied as
// two normal factors so that subnormal results round once.
static inline float kiln_expf(float x) {
  float xc = x > 88.7228394f ? 88.7228394f : x;
  xc = xc < -104.0f ? -104.0f : xc;
  xc = xc != xc ? 0.0f : xc;
  const float fn = (xc * 1.44269504088896341f + 12582912.0f) - 12582912.0f; // round to nearest
  const float r = (xc - fn * 0.693359375f) - fn * -2.12194440e-4f;
  const float z = r * r;
  float p = 1.9875691500e-4f;
  p = p * r + 1.3981999507e-3f;
  p = p * r + 8.3334519073e-3f;
  p = p * r + 4.1665795894e-2f;
  p = p * r + 1.6666665459e-1f;
  p = p * r + 5.0000001201e-1f;
  p = p * z + r + 1.0f;
  const int32_t n = static_cast<int32_t>(fn);
  const int32_t n1 = n / 2;
  const float result = p * kiln_f32_from_bits(uint32_t(n1 + 127) << 23) *
                       kiln_f32_from_bits(uint32_t(n - n1 + 127) << 23);
  return x != x ? x : (x > 88.7228394f ? std::numeric_limits<float>::infinity() : result);
}

// Python's // and % (index arithmetic on possibly negative values).
static inline int64_t kiln_floordiv(int64_t a, int64_t b) {
  const int64_t q = a / b;
  return (a % b != 0 && ((a < 0) != (b < 0))) ? q - 1 : q;
}
static inline int64_t kiln_mod(int64_t a, int64_t b) {
  const int64_t r = a % b;
  return (r != 0 && ((r < 0) != (b < 0))) ? r + b : r;
}

// Integer arithmetic wraps around like PyTorch's (no signed-overflow UB) and never traps: a
// division or remainder by zero gives 0 (eager PyTorch raises; compiled code cannot).
// (In uint64_t: narrower unsigned types would promote to int, where a product can overflow.)
template <typename T> static inline T kiln_add(T a, T b) { return T(uint64_t(a) + uint64_t(b)); }
template <typename T> static inline T kiln_sub(T a, T b) { return T(uint64_t(a) - uint64_t(b)); }
template <typename T> static inline T kiln_mul(T a, T b) { return T(uint64_t(a) * uint64_t(b)); }
template <typename T> static inline T kiln_div(T a, T b) {
  if (b == T(0)) return T(0);
  if (std::is_signed<T>::value && b == T(-1)) return kiln_sub(T(0), a);
  return T(a / b);
}
template <typename T> static inline T kiln_ifmod(T a, T b) {
  if (b == T(0) || (std::is_signed<T>::value && b == T(-1))) return T(0);
  return T(a % b);
}
template <typename T> static inline T kiln_iremainder(T a, T b) {
  const T r = kiln_ifmod(a, b);
  return (r != T(0) && ((r < T(0)) != (b < T(0)))) ? T(r + b) : r;
}
template <typename T> static inline T kiln_fremainder(T a, T b) {
  T r = std::fmod(a, b);
  if (r != T(0) && ((b < T(0)) != (r < T(0)))) r += b;
  return r;
}
// Integer power as PyTorch computes it (negative exponents: 1, -1 or 0).
template <typename T> static inline T kiln_ipow(T a, T b) {
  if (std::is_signed<T>::value && b < T(0)) {
    if (a == T(1)) return T(1);
    if (std::is_signed<T>::value && a == T(-1)) return (b % 2) ? T(-1) : T(1);
    return T(0);
  }
  T result = T(1);
  while (b) {
    if (b & 1) result = kiln_mul(result, a);
    b = T(b / 2);
    a = kiln_mul(a, a);
  }
  return result;
}
// maximum/minimum propagate NaN like torch.maximum/minimum.
template <typename T> static inline T kiln_maximum(T a, T b) { return (a != a || a > b) ? a : b; }
template <typename T> static inline T kiln_minimum(T a, T b) { return (a != a || a < b) ? a : b; }
)CPP";
  return text;
}

} // namespace kiln::codegen
