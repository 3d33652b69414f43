// cuBLAS, loaded at run time (dlopen; nothing CUDA at link time) for the GEMM steps of compiled
// CUDA programs (codegen/CudaCodegen.h, CudaGemm). The library is found in this order:
// $KILN_CUBLAS (a path; tests point it at the fake cuBLAS), the CUDA wheels in Python's search
// path (<dir>/nvidia/cu13/lib/libcublas.so.13, <dir>/nvidia/cublas/lib/libcublas.so.12: what
// PyTorch's CUDA wheels install), then the system's (libcublas.so.13, .12, libcublas.so, and in /usr/local/cuda/lib64).
#pragma once
#include <cstdint>
#include <string>
#include <vector>

#include "runtime/ScalarType.h"
#include "runtime/cuda/CudaStream.h"

namespace kiln::cuda {

// A row-major GEMM as cblas states it, per batch b:
//   C[b] = alpha * op(A[b]) @ op(B[b]) + beta * C[b], op(A) [m, k], op(B) [k, n], C [m, n];
// lda/ldb/ldc row-major leading dimensions, batch strides in elements; pointers are device
// addresses of the first batch's first element.
struct RowMajorGemm {
  ScalarType dtype = ScalarType::Float32; // A's and B's: f32, f64, f16, bf16 (the last two sum in f32)
  ScalarType outDtype = ScalarType::Float32; // C's: dtype, or f32 for 16-bit operands
  bool transA = false, transB = false;
  int64_t m = 0, n = 0, k = 0, lda = 0, ldb = 0, ldc = 0;
  int64_t batch = 1, strideA = 0, strideB = 0, strideC = 0;
  const void* a = nullptr;
  const void* b = nullptr;
  void* c = nullptr;
  double alpha = 1.0, beta = 0.0;
};

// Queues `g` on `stream` through cublasGemmStridedBatchedEx with the operands swapped for
// column-major cuBLAS (C^T = op(B)^T op(A)^T). `searchDirs`: Python's sys.path. A RuntimeError
// names what failed (no library, a cuBLAS status).
void gemm(const RowMajorGemm& g, CudaStream stream, const std::vector<std::string>& searchDirs = {});

// Whether cuBLAS can be loaded, and from where ("" when it cannot).
std::string cublasPath(const std::vector<std::string>& searchDirs = {});

} // namespace kiln::cuda
