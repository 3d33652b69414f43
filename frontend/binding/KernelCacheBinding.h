// kiln._C._codegen's compile/load/cache functions: the C++ toolchain and kernel cache (codegen/)
// for Python and the kiln CLI (emit_cpp, in the same submodule, is CppCodegenBinding's).
#pragma once
#include <nanobind/nanobind.h>

namespace kiln::python {

void registerKernelCache(nanobind::module_& m);

} // namespace kiln::python
