// CUDA code generation: a LoopProgram -> a CudaProgram, the CUDA C++ source of its kernels (one
// __global__ function per loop nest of the kernel plan, codegen/KernelPlan.h) plus the host-side
// launch list the device runtime executes in order: kernel launches, cuBLAS GEMMs,
// allocations and frees of intermediates, device-to-device copies. The runtime only interprets
// the list (docs/cuda-codegen.md); it decides nothing.
//
// Names in the list are storages: a program input (bound to the caller's pointer), a buffer
// (an intermediate from an Alloc step, or output slot i's memory when `outputBuffers[i]` names
// it), a temporary of a GEMM step (Alloc'ed like an intermediate), or "output:i" (the caller's
// output slot i itself). Extents, grid sizes and byte counts are IndexExprs over the program's
// size symbols; the runtime evaluates them with the symbols' values of the call
// (IndexExpr::evaluate).
#pragma once
#include <cstdint>
#include <map>
#include <string>
#include <variant>
#include <vector>

#include "ir/loop/LoopIR.h"

namespace kiln::codegen {

// One argument of a kernel launch, in parameter order.
struct CudaArg {
  enum class Kind {
    Pointer, // the device pointer of storage `name` (`T*` or `const T*`)
    Size,    // the value of size symbol `name` (int64_t)
    Error,   // the device KilnError* of the call (struct KilnError of the CUDA prelude)
  };
  Kind kind = Kind::Pointer;
  std::string name;
};

// kernel<<<grid, block, sharedBytes>>>(args...) on the call's stream; grid is 1-D.
struct CudaLaunch {
  std::string kernel;   // an extern "C" __global__ function of the source
  IndexExpr grid;       // blocks, at least 1 for every size
  int block = 256;      // threads per block
  int sharedBytes = 0;  // dynamic shared memory (static __shared__ arrays are in the kernel)
  std::vector<CudaArg> args;
  bool checksErrors = false; // reports out-of-range indirect indices to the KilnError
  std::string label;    // what it computes (a comment for listings)
};

// A row-major GEMM as cblas states it (the runtime swaps operands for column-major cuBLAS:
// C^T = op(B)^T op(A)^T): for each batch b < batch,
//   c[b] = alpha * op(a[b]) @ op(b[b]) + beta * c[b],  op = transpose when trans*.
// a[b] starts at element offsetA + b * strideA of storage `a` (likewise b, c); m, n, k are the
// sizes of op(a) = [m, k], op(b) = [k, n]; lda/ldb/ldc are row-major leading dimensions.
// dtype f32/f64 (cublasSgemm/Dgemm), f16/bf16 (cublasGemmEx, f32 compute).
struct CudaGemm {
  ScalarType dtype = ScalarType::Float32;    // the operands'
  ScalarType outDtype = ScalarType::Float32; // C's: dtype, or f32 for 16-bit operands
  bool transA = false, transB = false;
  IndexExpr m, n, k, lda, ldb, ldc;
  IndexExpr batch = IndexExpr(1), strideA = IndexExpr(0), strideB = IndexExpr(0),
            strideC = IndexExpr(0);
  std::string a, b, c;
  int64_t offsetA = 0, offsetB = 0;
  double alpha = 1.0, beta = 0.0;
  std::string label;
};

// Device memory for storage `name`: at least max(bytes, 1) bytes (the caching allocator).
struct CudaAlloc {
  std::string name;
  IndexExpr bytes;
};
// `name` uses the storage of `of` (the memory plan's reuse, Buffer::reuses): no allocation.
struct CudaAlias {
  std::string name, of;
};
struct CudaFree {
  std::string name;
};
// bytes from storage `src` to storage `dst` (cudaMemcpyAsync device to device).
struct CudaCopy {
  std::string dst, src;
  IndexExpr bytes;
};

using CudaStep = std::variant<CudaLaunch, CudaGemm, CudaAlloc, CudaAlias, CudaFree, CudaCopy>;

struct CudaProgram {
  std::string name;                   // the loop program's
  std::string source;                 // CUDA C++ for NVRTC (no includes)
  std::vector<std::string> inputs;    // the program's inputs in argument order
  std::vector<std::string> symbols;   // size symbols, in the order of the call's `sizes`
  // Per output slot: the buffer computed in the slot's memory ("" when the slot is filled by
  // a CudaCopy step to "output:i").
  std::vector<std::string> outputBuffers;
  std::vector<CudaStep> steps;
  bool usesErrors = false; // some launch checks errors: the runtime zeroes a KilnError first
};

struct CudaOptions {
  // The values size symbols are expected to take (launch shapes only; never results).
  std::map<std::string, int64_t> sizeHints;
};

// The CUDA program of `p`. Throws kiln::Error for what the generator does not handle: extern
// kernels other than mm/bmm/addmm, size symbols not named s0, s1, ...
CudaProgram emitCuda(const LoopProgram& p, const CudaOptions& options = {});

// A listing of the launch list (one line per step), for kiln-opt and tests.
std::string printLaunchList(const CudaProgram& p);

} // namespace kiln::codegen
