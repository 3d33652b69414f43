// Nested Python data <-> tensors: the core of kiln.tensor (PyTorch's dtype inference, shape
// discovery and checked element conversion) and Tensor.tolist.
#pragma once
#include <optional>

#include "frontend/binding/TensorBinding.h"

namespace kiln::python {

// A new CPU tensor holding `data`: nested lists/tuples/ranges of numbers, numpy arrays and
// scalars, kiln tensors. dtype None infers it the way torch.tensor does.
Tensor tensorFromData(PyObject* data, std::optional<ScalarType> dtype);
// kiln._C._tensor_from_data and Tensor.tolist.
void registerTensorData(nb::module_& m, TensorClass& cls);

} // namespace kiln::python
