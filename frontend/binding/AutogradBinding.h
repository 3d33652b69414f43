// kiln._C's autograd surface: Tensor.grad / grad_fn / hooks, the backward entry point, graph
// nodes as Python objects, and custom Python Functions (kiln.autograd.Function).
#pragma once
#include "frontend/binding/TensorBinding.h"

namespace kiln::python {

void registerAutograd(nb::module_& m, TensorClass& tensorClass);

} // namespace kiln::python
