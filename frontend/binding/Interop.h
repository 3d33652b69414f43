// numpy interop: kiln.from_numpy and Tensor.numpy(), both sharing memory.
#pragma once
#include "frontend/binding/TensorBinding.h"

namespace kiln::python {

void registerInterop(nb::module_& m, TensorClass& cls);

} // namespace kiln::python
