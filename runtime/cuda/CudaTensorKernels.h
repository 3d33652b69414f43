// The CUDA dispatch key's kernels that need no generated code: views (the shared CPU/Meta view
// kernels, which never touch data), allocation, copy_ in every direction, fill_, _to_copy,
// clone, and factories (computed on the host, then uploaded). Every other op on a CUDA tensor
// raises a NotImplementedError that names it, until the generated CUDA eager kernels land.
#pragma once

namespace kiln {
class Dispatcher;
}

namespace kiln::cuda {

void registerCudaTensorKernels(Dispatcher& d);

} // namespace kiln::cuda
