// Helpers shared by the non-core -> core ATen decompositions (compiler/decompositions/CoreAten*.cpp).
#pragma once
#include "generated/Ops.h"
#include "runtime/ScalarType.h"

namespace kiln::decompositions {

// The dtype 16-bit floats compute in (float32), as PyTorch's get_computation_dtype.
inline ScalarType computationDtype(ScalarType t) {
  return t == ScalarType::Float16 || t == ScalarType::BFloat16 ? ScalarType::Float32 : t;
}

// `t` converted to `dtype` through _to_copy (core), or `t` itself when it already has it.
inline Tensor convert(const Tensor& t, ScalarType dtype) {
  return t.dtype() == dtype ? t : ops::_to_copy(t, dtype);
}

} // namespace kiln::decompositions
