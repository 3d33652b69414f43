// The GEMMs behind mm/addmm/bmm/matmul (BlasKernels.cpp), convolution's im2col products and
// compiled code's extern mm (through KilnContext): float32 through oneDNN's dnnl_sgemm, float64
// through OpenBLAS (its OpenMP build). Both thread with libgomp, kiln's own OpenMP runtime: one
// pool for every kernel, and a GEMM called inside a parallel region runs on its calling thread.
#pragma once
#include <omp.h>

#include <cstdint>

#include "runtime/TensorImpl.h"

namespace kiln::cpu {

// c = a @ b (+ c when accumulate) for matrices a [m, k], b [k, n], c [m, n] of one dtype; a and
// b may be any strided views (transposes are free); c must be contiguous.
void gemmInto(const Tensor& a, const Tensor& b, const Tensor& c, bool accumulate);

// Row-major C[m, n] = alpha * op(A) @ op(B) + beta * C (op: transposed when ta / tb), the
// CBLAS convention; beta == 0 does not read C. Products too small to gain from threads run on
// the calling thread (gemmThreads). dnnl_sgemm, or oneDNN's matmul primitive where that is
// faster (preferMatmulPrimitive).
void sgemm(bool ta, bool tb, int64_t m, int64_t n, int64_t k, float alpha, const float* a,
           int64_t lda, const float* b, int64_t ldb, float beta, float* c, int64_t ldc);
// sgemm always through dnnl_sgemm (the fallback of DnnlMatmul.h's primitives).
void sgemmLibrary(bool ta, bool tb, int64_t m, int64_t n, int64_t k, float alpha, const float* a,
                  int64_t lda, const float* b, int64_t ldb, float beta, float* c, int64_t ldc);
// Whether sgemm runs this product (alpha 1, beta 0) as oneDNN's matmul primitive rather than
// dnnl_sgemm: where the primitive was measured faster (a transposed B with few rows or columns,
// on more than one thread).
bool preferMatmulPrimitive(bool ta, bool tb, int64_t m, int64_t n, int64_t k);
void dgemm(bool ta, bool tb, int64_t m, int64_t n, int64_t k, double alpha, const double* a,
           int64_t lda, const double* b, int64_t ldb, double beta, double* c, int64_t ldc);

// Runs f with at most `threads` OpenMP threads for the parallel regions it opens (oneDNN and
// OpenBLAS's OpenMP build both read omp_get_max_threads() per call).
template <typename F> void withThreads(int threads, F&& f) {
  int saved = omp_get_max_threads();
  if (threads >= saved || omp_in_parallel()) return f();
  omp_set_num_threads(threads);
  f();
  omp_set_num_threads(saved);
}

// The threads a GEMM of this size gets: 1 below a measured number of multiply-adds (about
// 64 x 64 x 80; about 2M when k <= 16, where the product is mostly the writing of C), else
// omp_get_max_threads().
int gemmThreads(int64_t m, int64_t n, int64_t k);

} // namespace kiln::cpu
