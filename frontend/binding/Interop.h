// numpy interop: kiln.from_numpy and Tensor.numpy(), both sharing memory.
#pragma once
#include <nanobind/ndarray.h>

#include "frontend/binding/TensorBinding.h"

namespace kiln::python {

// A tensor viewing the array's memory; `owner` is kept alive as long as the storage lives.
Tensor tensorFromArray(nb::ndarray<nb::ro> a, nb::handle owner);

void registerInterop(nb::module_& m, TensorClass& cls);

} // namespace kiln::python
