// Float32 GEMMs with fused post-ops through oneDNN's matmul primitive (DnnlMatmul.cpp): compiled
// code runs a GEMM and the pointwise chain after it (bias, activation, residual add) in one call,
// each output tile transformed while it is still in registers (ir/loop/GemmEpilogue.h).
#pragma once
#include <cstdint>

namespace kiln::cpu {

// The steps, numbered as GemmPostOp::Kind (ir/loop/GemmEpilogue.h): the generated code passes
// these integers.
enum class PostOpKind : int {
  Linear, Relu, GeluErf, GeluTanh, Tanh, Sigmoid, Silu, Exp, Abs, Sqrt,
  Add, Sub, Mul, Div, Max, Min,
};

struct PostOp {
  PostOpKind kind;
  float alpha, beta;      // Linear: alpha * v + beta
  const float* tensor;    // binary: element [i, j] at tensor[i * rowStride + j]
  int64_t rowStride;      // 0: one row broadcast over all rows
};

// Row-major c[m, n] = post(op(a) @ op(b)) (op: transposed when ta / tb; CBLAS's leading
// dimensions). Primitives are cached per calling thread by shape, layout, post-ops and thread count; where oneDNN
// has none, sgemm and a plain loop over the post-ops compute the same thing.
void sgemmPostOps(bool ta, bool tb, int64_t m, int64_t n, int64_t k, const float* a, int64_t lda,
                  const float* b, int64_t ldb, float* c, int64_t ldc, const PostOp* ops, int nops);

// Row-major c_i = op(a_i) @ op(b_i) for i < batch, operand x_i at x + i * strideX (a stride of 0
// shares one matrix between all entries): one oneDNN batched matmul primitive, one parallel
// region over every entry's tiles (a loop of per-entry GEMMs opens a region per entry). Where
// oneDNN has no primitive, entries run as single-threaded GEMMs in parallel (or one after the
// other, each threaded, when there are fewer entries than threads).
void sgemmBatched(bool ta, bool tb, int64_t batch, int64_t m, int64_t n, int64_t k, const float* a,
                  int64_t lda, int64_t strideA, const float* b, int64_t ldb, int64_t strideB,
                  float* c, int64_t ldc, int64_t strideC);

// The same for bfloat16 operands and result (accumulated in float32, rounded once, as the
// widening path computes it) on oneDNN's AVX-512 BF16 / AMX kernels: false where this CPU has
// none (the caller widens to float32).
// c is float32 when f32Out (the unrounded product), else bfloat16.
bool bf16GemmBatched(bool ta, bool tb, int64_t batch, int64_t m, int64_t n, int64_t k, const uint16_t* a,
                     int64_t lda, int64_t strideA, const uint16_t* b, int64_t ldb, int64_t strideB,
                     void* c, int64_t ldc, int64_t strideC, bool f32Out = false);

// A batch of 16-bit float GEMMs (bf16: bfloat16, else half), arguments as sgemmBatched's:
// bfloat16 through bf16GemmBatched where it runs, else (and for half) widened to float32,
// multiplied by sgemmBatched and rounded once (f32Out: c is float32, the product unrounded).
void gemm16Batched(bool bf16, bool f32Out, bool ta, bool tb, int64_t batch, int64_t m, int64_t n, int64_t k,
                   const uint16_t* a, int64_t lda, int64_t strideA, const uint16_t* b, int64_t ldb,
                   int64_t strideB, void* c, int64_t ldc, int64_t strideC);

// The post-ops applied to one value by the plain loop (also the reference the tests use).
float applyPostOps(float v, const PostOp* ops, int nops, int64_t row, int64_t col);

} // namespace kiln::cpu
