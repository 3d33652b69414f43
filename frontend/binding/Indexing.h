// Python indexing of tensors with PyTorch's rules: __getitem__ / __setitem__ turn an index (ints,
// slices, None, Ellipsis, bools, integer/bool tensors and lists) into view ops, then advanced
// indexing (index / index_put_) for the tensor parts. Also the sequence protocol (__len__,
// __iter__, __index__) and the transpose properties T, mT, H, mH.
#pragma once
#include "frontend/binding/TensorBinding.h"

namespace kiln::python {

void registerIndexing(TensorClass& cls);

} // namespace kiln::python
