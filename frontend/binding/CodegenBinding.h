// kiln._C._codegen: the C++ toolchain and kernel cache (codegen/) for Python and the kiln CLI.
#pragma once
#include <nanobind/nanobind.h>

namespace kiln::python {

void registerCodegen(nanobind::module_& m);

} // namespace kiln::python
