// kiln._C._codegen.emit_cuda / nvrtc_*: the CUDA code generator and NVRTC from Python (loop
// program text -> CUDA source and launch list -> CUBIN), usable without a GPU.
#pragma once
#include <nanobind/nanobind.h>

namespace kiln::python {

void registerCudaCodegen(nanobind::module_& m);
// kiln._C._codegen.CudaCompiledProgram (CudaProgramBinding.cpp), into the _codegen module `c`.
void registerCudaCompiledProgram(nanobind::module_& c);

} // namespace kiln::python
