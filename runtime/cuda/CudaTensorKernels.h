// The CUDA dispatch key's kernels that need no generated code: views (the shared CPU/Meta view
// kernels, which never touch data), allocation, copy_ in every direction, fill_, _to_copy,
// clone, and factories (computed on the host, then uploaded). Every other op on a CUDA tensor
// goes to the eager hook: the Python layer compiles the op's prims decomposition into a CUDA
// program (kiln/compiler/cuda_eager.py); an op it cannot compile raises NotImplementedError
// naming the op.
#pragma once
#include "generated/OpId.h"
#include "runtime/Value.h"

namespace kiln {
class Dispatcher;
}

namespace kiln::cuda {

void registerCudaTensorKernels(Dispatcher& d);

// Runs `op` on the boxed `stack` (arguments in, returns out) with a generated kernel; returns
// false when no hook can (no Python layer), and throws the hook's error otherwise.
using CudaEagerHook = bool (*)(OpId op, Stack& stack);
void setCudaEagerHook(CudaEagerHook hook);

} // namespace kiln::cuda
