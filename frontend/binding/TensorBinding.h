// kiln._C.TensorBase: the Python face of kiln::Tensor (kiln.Tensor subclasses it in Python).
#pragma once
#include <nanobind/nanobind.h>

#include "runtime/TensorImpl.h"

namespace kiln::python {

namespace nb = nanobind;
using TensorClass = nb::class_<Tensor>;

TensorClass registerTensor(nb::module_& m);
// kiln.Size from sizes (a tuple subclass, like torch.Size).
PyObject* makeSize(IntArrayRef sizes);

} // namespace kiln::python
