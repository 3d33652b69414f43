// kiln._C._codegen.CompiledKernel: a compiled loop program's entry, callable with kiln tensors
// (inputs checked against the program, outputs allocated by kiln) for the "inductor" backend.
#pragma once
#include <nanobind/nanobind.h>

namespace kiln::python {

void registerCompiledKernel(nanobind::module_& m);

} // namespace kiln::python
