// The GEMM behind mm/addmm (BlasKernels.cpp) for kernels that multiply into buffers of their own
// (convolution's im2col products): OpenBLAS for float32/float64, a widening loop otherwise.
#pragma once
#include "runtime/TensorImpl.h"

namespace kiln::cpu {

// c = a @ b (+ c when accumulate) for matrices a [m, k], b [k, n], c [m, n] of one dtype; a and
// b may be any strided views (transposes are free); c must be contiguous.
void gemmInto(const Tensor& a, const Tensor& b, const Tensor& c, bool accumulate);

int blasThreads();
void setBlasThreads(int threads);

// OpenBLAS single-threaded for this scope (when active): OpenMP threads that each run their own
// GEMMs must not each start OpenBLAS's thread pool too.
class SingleThreadedBlas {
public:
  explicit SingleThreadedBlas(bool active) : saved_(active ? blasThreads() : 0) {
    if (active) setBlasThreads(1);
  }
  ~SingleThreadedBlas() {
    if (saved_) setBlasThreads(saved_);
  }
  SingleThreadedBlas(const SingleThreadedBlas&) = delete;
  SingleThreadedBlas& operator=(const SingleThreadedBlas&) = delete;

private:
  int saved_;
};

} // namespace kiln::cpu
