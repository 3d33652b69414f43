// The fixed head of generated C++ sources (see CppPrelude.h). It is plain C++17 including only
// <stddef.h> and <stdint.h> (C++ standard headers such as <cmath> and <algorithm> cost more to
// parse than the kernels take to compile: math is __builtin_* and the helpers of CppPreludeMath).
#include "codegen/CppPrelude.h"

namespace kiln::codegen {

const std::string& cppPrelude() {
  static const std::string text = R"CPP(#include <stddef.h>
#include <stdint.h>
#ifdef _OPENMP
extern "C" int omp_get_max_threads(void);
#endif

// The first out-of-range index a kernel met: the program returns 2 after the kernel, and the
// caller raises `message` ("IndexError: ..." with {index} and {size}) for it.
struct KilnError {
  int set; // 0 until an error is recorded (the first one wins, across threads)
  int64_t index, size;
  const char* message;
};

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
  // c = post(op(a) @ op(b)), row-major f32 (ir/loop/GemmEpilogue.h): post-op i is kinds[i]
  // (GemmPostOp::Kind), scalars[2i], scalars[2i+1] (a linear step's alpha, beta), and for a
  // binary step tensors[i] read at [row * row_strides[i] + col].
  void (*sgemm_post)(int trans_a, int trans_b, int m, int n, int k, const float* a, int lda,
                     const float* b, int ldb, float* c, int ldc, int nops, const int* kinds,
                     const float* scalars, const float* const* tensors, const int64_t* row_strides);
  KilnError* error; // where an out-of-range indirect index is reported
  // c + i * stride_c = op(a + i * stride_a) @ op(b + i * stride_b) for i < batch, row-major
  // f32 (a stride of 0 shares one matrix): one batched product, one parallel region.
  void (*sgemm_batched)(int trans_a, int trans_b, int64_t batch, int m, int n, int k,
                        const float* a, int lda, int64_t stride_a, const float* b, int ldb,
                        int64_t stride_b, float* c, int ldc, int64_t stride_c);
  // The same for 16-bit float operands (bf16: 1 = bfloat16, 0 = half), accumulated in f32; c is
  // f32 when f32_out, else the operands' type (rounded once).
  void (*gemm16_batched)(int bf16, int f32_out, int trans_a, int trans_b, int64_t batch, int m, int n,
                         int k, const uint16_t* a, int lda, int64_t stride_a, const uint16_t* b,
                         int ldb, int64_t stride_b, void* c, int ldc, int64_t stride_c);
};

__attribute__((cold, noinline)) static void kiln_index_error(struct KilnError* err, int64_t index,
                                                             int64_t size, const char* message) {
  if (__atomic_exchange_n(&err->set, 1, __ATOMIC_ACQ_REL) == 0) {
    err->index = index;
    err->size = size;
    err->message = message;
  }
}

// An indirect index: `v` (v + size when negative and `wrap`) if it is in [0, size), else the
// error is recorded and 0 returned, so the loads and stores through it stay inside a nonempty
// buffer while the kernel finishes.
static inline int64_t kiln_index(int64_t v, int64_t size, int wrap, struct KilnError* err,
                                 const char* message) {
  const int64_t w = (wrap && v < 0) ? v + size : v;
  if (__builtin_expect(static_cast<uint64_t>(w) >= static_cast<uint64_t>(size), 0)) {
    kiln_index_error(err, v, size, message);
    return 0;
  }
  return w;
}

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
  __builtin_memcpy(&u, &f, sizeof u);
  return u;
}
static inline float kiln_f32_from_bits(uint32_t u) {
  float f;
  __builtin_memcpy(&f, &u, sizeof f);
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
  float base = (__builtin_fabsf(f) * 0x1.0p+112f) * 0x1.0p-110f;
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

// Python's // and % (index arithmetic on possibly negative values).
static inline int64_t kiln_floordiv(int64_t a, int64_t b) {
  const int64_t q = a / b;
  return (a % b != 0 && ((a < 0) != (b < 0))) ? q - 1 : q;
}
static inline int64_t kiln_mod(int64_t a, int64_t b) {
  const int64_t r = a % b;
  return (r != 0 && ((r < 0) != (b < 0))) ? r + b : r;
}

template <typename T> static constexpr bool kiln_is_signed() { return T(-1) < T(0); }
// max/min as std::max/std::min (the first argument when neither is less).
template <typename T> static inline T kiln_max(T a, T b) { return a < b ? b : a; }
template <typename T> static inline T kiln_min(T a, T b) { return b < a ? b : a; }

// Integer arithmetic wraps around like PyTorch's (no signed-overflow UB) and never traps: a
// division or remainder by zero gives 0 (eager PyTorch raises; compiled code cannot).
// (In uint64_t: narrower unsigned types would promote to int, where a product can overflow.)
template <typename T> static inline T kiln_add(T a, T b) { return T(uint64_t(a) + uint64_t(b)); }
template <typename T> static inline T kiln_sub(T a, T b) { return T(uint64_t(a) - uint64_t(b)); }
template <typename T> static inline T kiln_mul(T a, T b) { return T(uint64_t(a) * uint64_t(b)); }
template <typename T> static inline T kiln_div(T a, T b) {
  if (b == T(0)) return T(0);
  if (kiln_is_signed<T>() && b == T(-1)) return kiln_sub(T(0), a);
  return T(a / b);
}
template <typename T> static inline T kiln_ifmod(T a, T b) {
  if (b == T(0) || (kiln_is_signed<T>() && b == T(-1))) return T(0);
  return T(a % b);
}
template <typename T> static inline T kiln_iremainder(T a, T b) {
  const T r = kiln_ifmod(a, b);
  return (r != T(0) && ((r < T(0)) != (b < T(0)))) ? T(r + b) : r;
}
static inline float kiln_fremainder(float a, float b) {
  float r = __builtin_fmodf(a, b);
  return (r != 0.0f && ((b < 0.0f) != (r < 0.0f))) ? r + b : r;
}
static inline double kiln_fremainder(double a, double b) {
  double r = __builtin_fmod(a, b);
  return (r != 0.0 && ((b < 0.0) != (r < 0.0))) ? r + b : r;
}
// Integer power as PyTorch computes it (negative exponents: 1, -1 or 0).
template <typename T> static inline T kiln_ipow(T a, T b) {
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
// maximum/minimum propagate NaN like torch.maximum/minimum.
template <typename T> static inline T kiln_maximum(T a, T b) { return (a != a || a > b) ? a : b; }
template <typename T> static inline T kiln_minimum(T a, T b) { return (a != a || a < b) ? a : b; }
)CPP" + cppPreludeMath();
  return text;
}

} // namespace kiln::codegen
