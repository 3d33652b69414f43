// kiln._C._codegen.emit_cpp: the C++ code generator's Python face (loop program text -> C++).
#pragma once
#include <nanobind/nanobind.h>

namespace kiln::python {

void registerCppCodegen(nanobind::module_& m);

} // namespace kiln::python
