// The CUDA prelude (see CudaPrelude.h). CppExpr writes GCC builtins (`__builtin_fabsf`,
// `__builtin_inff()`); the CUDA emitter renames them `kiln_b_*` (defined here) rather than
// relying on which builtins NVRTC's front end accepts in device code.
#include "codegen/CudaPrelude.h"
#include <cstdint>

namespace kiln::codegen {

const std::string& cudaPrelude() {
  static const std::string text = R"CUDA(// kiln CUDA prelude
typedef signed char int8_t;
typedef unsigned char uint8_t;
typedef short int16_t;
typedef unsigned short uint16_t;
typedef int int32_t;
typedef unsigned int uint32_t;
typedef long int64_t;
typedef unsigned long uint64_t;
#define UINT16_C(x) ((uint16_t)(x))
#define UINT32_C(x) x##u
#define INT64_C(x) x##l
#define KILN_D __device__ __forceinline__
#define KILN_NO_INDEX 0x7fffffffffffffffl

// The first out-of-range indirect index of a call (zeroed by the runtime before it): the
// winning thread copies its message, which the runtime raises with {index} and {size}.
struct KilnError {
  int set;
  int64_t index, size;
  char message[256];
};

__device__ __noinline__ void kiln_index_error(KilnError* err, int64_t index, int64_t size,
                                                    const char* message) {
  if (atomicExch(&err->set, 1) == 0) {
    err->index = index;
    err->size = size;
    int i = 0;
    for (; i < 255 && message[i]; ++i) err->message[i] = message[i];
    err->message[i] = 0;
    __threadfence();
  }
}
// An indirect index: `v` (v + size when negative and `wrap`) if it is in [0, size), else the
// error is recorded and 0 returned, so loads and stores through it stay inside the buffer.
KILN_D int64_t kiln_index(int64_t v, int64_t size, int wrap, KilnError* err, const char* message) {
  const int64_t w = (wrap && v < 0) ? v + size : v;
  if ((uint64_t)w >= (uint64_t)size) {
    kiln_index_error(err, v, size, message);
    return 0;
  }
  return w;
}

// The GCC builtins of the C++ bodies.
KILN_D float kiln_b_fabsf(float x) { return fabsf(x); }
KILN_D double kiln_b_fabs(double x) { return fabs(x); }
KILN_D float kiln_b_floorf(float x) { return floorf(x); }
KILN_D double kiln_b_floor(double x) { return floor(x); }
KILN_D float kiln_b_ceilf(float x) { return ceilf(x); }
KILN_D double kiln_b_ceil(double x) { return ceil(x); }
KILN_D float kiln_b_truncf(float x) { return truncf(x); }
KILN_D double kiln_b_trunc(double x) { return trunc(x); }
KILN_D float kiln_b_nearbyintf(float x) { return rintf(x); }
KILN_D double kiln_b_nearbyint(double x) { return rint(x); }
KILN_D float kiln_b_sqrtf(float x) { return sqrtf(x); }
KILN_D double kiln_b_sqrt(double x) { return sqrt(x); }
KILN_D float kiln_b_fmodf(float a, float b) { return fmodf(a, b); }
KILN_D double kiln_b_fmod(double a, double b) { return fmod(a, b); }
KILN_D bool kiln_b_isfinite(float x) { return isfinite(x); }
KILN_D bool kiln_b_isfinite(double x) { return isfinite(x); }
KILN_D float kiln_b_inff() { return __int_as_float(0x7f800000); }
KILN_D double kiln_b_inf() { return __longlong_as_double(0x7ff0000000000000ll); }
KILN_D float kiln_b_nanf(const char*) { return __int_as_float(0x7fc00000); }
KILN_D double kiln_b_nan(const char*) { return __longlong_as_double(0x7ff8000000000000ll); }

// IEEE half <-> float, bit-exact with round-to-nearest-even (as the C++ prelude: the FP16
// library's algorithm, which c10::Half uses).
KILN_D float kiln_h2f(uint16_t h) {
  const uint32_t w = uint32_t(h) << 16;
  const uint32_t sign = w & 0x80000000u;
  const uint32_t two_w = w + w;
  const float normalized = __uint_as_float((two_w >> 4) + (0xE0u << 23)) * 0x1.0p-112f;
  const float denormalized = __uint_as_float((two_w >> 17) | (126u << 23)) - 0.5f;
  const uint32_t bits = two_w < (1u << 27) ? __float_as_uint(denormalized) : __float_as_uint(normalized);
  return __uint_as_float(sign | bits);
}
KILN_D uint16_t kiln_f2h(float f) {
  float base = (fabsf(f) * 0x1.0p+112f) * 0x1.0p-110f;
  const uint32_t w = __float_as_uint(f);
  const uint32_t shl1_w = w + w;
  const uint32_t sign = w & 0x80000000u;
  uint32_t bias = shl1_w & 0xFF000000u;
  if (bias < 0x71000000u) bias = 0x71000000u;
  base = __uint_as_float((bias >> 1) + 0x07800000u) + base;
  const uint32_t bits = __float_as_uint(base);
  const uint32_t nonsign = ((bits >> 13) & 0x00007C00u) + (bits & 0x00000FFFu);
  return uint16_t((sign >> 16) | (shl1_w > 0xFF000000u ? 0x7E00u : nonsign));
}
KILN_D float kiln_bf2f(uint16_t b) { return __uint_as_float(uint32_t(b) << 16); }
KILN_D uint16_t kiln_f2bf(float f) {
  if (f != f) return uint16_t(0x7FC0);
  const uint32_t u = __float_as_uint(f);
  return uint16_t((u + 0x7FFFu + ((u >> 16) & 1u)) >> 16);
}
KILN_D float kiln_round_h(float f) { return kiln_h2f(kiln_f2h(f)); }
KILN_D float kiln_round_bf(float f) { return kiln_bf2f(kiln_f2bf(f)); }

// Python's // and % (index arithmetic on possibly negative values).
KILN_D int64_t kiln_floordiv(int64_t a, int64_t b) {
  const int64_t q = a / b;
  return (a % b != 0 && ((a < 0) != (b < 0))) ? q - 1 : q;
}
KILN_D int64_t kiln_mod(int64_t a, int64_t b) {
  const int64_t r = a % b;
  return (r != 0 && ((r < 0) != (b < 0))) ? r + b : r;
}

template <typename T> __device__ constexpr bool kiln_is_signed() { return T(-1) < T(0); }
template <typename T> KILN_D T kiln_max(T a, T b) { return a < b ? b : a; }
template <typename T> KILN_D T kiln_min(T a, T b) { return b < a ? b : a; }

// Integer arithmetic wraps (no signed-overflow UB) and never traps (x / 0 == 0).
template <typename T> KILN_D T kiln_add(T a, T b) { return T(uint64_t(a) + uint64_t(b)); }
template <typename T> KILN_D T kiln_sub(T a, T b) { return T(uint64_t(a) - uint64_t(b)); }
template <typename T> KILN_D T kiln_mul(T a, T b) { return T(uint64_t(a) * uint64_t(b)); }
template <typename T> KILN_D T kiln_div(T a, T b) {
  if (b == T(0)) return T(0);
  if (kiln_is_signed<T>() && b == T(-1)) return kiln_sub(T(0), a);
  return T(a / b);
}
template <typename T> KILN_D T kiln_ifmod(T a, T b) {
  if (b == T(0) || (kiln_is_signed<T>() && b == T(-1))) return T(0);
  return T(a % b);
}
template <typename T> KILN_D T kiln_iremainder(T a, T b) {
  const T r = kiln_ifmod(a, b);
  return (r != T(0) && ((r < T(0)) != (b < T(0)))) ? T(r + b) : r;
}
KILN_D float kiln_fremainder(float a, float b) {
  float r = fmodf(a, b);
  return (r != 0.0f && ((b < 0.0f) != (r < 0.0f))) ? r + b : r;
}
KILN_D double kiln_fremainder(double a, double b) {
  double r = fmod(a, b);
  return (r != 0.0 && ((b < 0.0) != (r < 0.0))) ? r + b : r;
}
template <typename T> KILN_D T kiln_ipow(T a, T b) {
  if (kiln_is_signed<T>() && b < T(0)) {
    if (a == T(1)) return T(1);
    if (kiln_is_signed<T>() && a == T(-1)) return (b % 2) ? T(-1) : T(1);
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
template <typename T> KILN_D T kiln_maximum(T a, T b) { return (a != a || a > b) ? a : b; }
template <typename T> KILN_D T kiln_minimum(T a, T b) { return (a != a || a < b) ? a : b; }

// Math: the C++ prelude's names, CUDA's (libdevice) functions.
#define KILN_MATH1(name, single, dbl)                                                            \
  KILN_D float name##f(float x) { return single(x); }                                           \
  KILN_D double name(double x) { return dbl(x); }
KILN_MATH1(kiln_exp, expf, exp)
KILN_MATH1(kiln_expm1, expm1f, expm1)
KILN_MATH1(kiln_log, logf, log)
KILN_MATH1(kiln_log1p, log1pf, log1p)
KILN_MATH1(kiln_tanh, tanhf, tanh)
KILN_MATH1(kiln_vexp2, exp2f, exp2)
KILN_MATH1(kiln_vlog2, log2f, log2)
KILN_MATH1(kiln_vsin, sinf, sin)
KILN_MATH1(kiln_vcos, cosf, cos)
KILN_MATH1(kiln_vtan, tanf, tan)
KILN_MATH1(kiln_vasin, asinf, asin)
KILN_MATH1(kiln_vacos, acosf, acos)
KILN_MATH1(kiln_vatan, atanf, atan)
KILN_MATH1(kiln_vsinh, sinhf, sinh)
KILN_MATH1(kiln_vcosh, coshf, cosh)
KILN_MATH1(kiln_verf, erff, erf)
KILN_D float kiln_vpowf(float a, float b) { return powf(a, b); }
KILN_D double kiln_vpow(double a, double b) { return pow(a, b); }
KILN_D float kiln_vatan2f(float a, float b) { return atan2f(a, b); }
KILN_D double kiln_vatan2(double a, double b) { return atan2(a, b); }

// `n` consecutive elements moved by one load or store (16 bytes or fewer), and whether a
// pointer is aligned for them (a view at an odd offset is not: the scalar loop runs).
template <typename T, int N> struct alignas(sizeof(T) * N) kiln_vec {
  T v[N];
};
template <typename T> KILN_D bool kiln_aligned(const T* p, int n) {
  return (reinterpret_cast<unsigned long>(p) % (sizeof(T) * n)) == 0;
}

// A value from lane (lane ^ mask) of the warp, any accumulator type (narrow ints via int).
template <typename T> KILN_D T kiln_shfl_xor(T v, int mask) {
  if constexpr (sizeof(T) < 4) return T(__shfl_xor_sync(0xffffffffu, int(v), mask));
  else return __shfl_xor_sync(0xffffffffu, v, mask);
}
template <typename T> KILN_D T kiln_shfl(T v, int lane) {
  if constexpr (sizeof(T) < 4) return T(__shfl_sync(0xffffffffu, int(v), lane));
  else return __shfl_sync(0xffffffffu, v, lane);
}
)CUDA";
  return text;
}

} // namespace kiln::codegen
