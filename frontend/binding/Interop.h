// Zero-copy interop: kiln.from_numpy / Tensor.numpy and DLPack both ways (Tensor.__dlpack__,
// __dlpack_device__, kiln._C._from_dlpack).
#pragma once
#include <nanobind/ndarray.h>

#include "frontend/binding/TensorBinding.h"

namespace kiln::python {

// A tensor viewing the array's memory; `owner` is kept alive as long as the storage lives.
Tensor tensorFromArray(nb::ndarray<nb::ro> a, nb::handle owner);

void registerInterop(nb::module_& m, TensorClass& cls);

} // namespace kiln::python
