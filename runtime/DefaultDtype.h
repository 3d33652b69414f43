// torch.set_default_dtype: the dtype of the floating-point values made without one (factories
// without dtype=, Python floats in kiln.tensor, ints promoted by true division, Python float
// operands) and, paired with it, the default complex dtype. float32 unless the user sets it.
#pragma once
#include <atomic>

#include "runtime/ScalarType.h"

namespace kiln {

inline std::atomic<ScalarType> gDefaultFloatType{ScalarType::Float32};

inline ScalarType defaultFloatType() { return gDefaultFloatType.load(std::memory_order_relaxed); }

// complex128 when the default is float64 (as torch's get_default_dtype pairing), else complex64.
inline ScalarType defaultComplexType() {
  return defaultFloatType() == ScalarType::Float64 ? ScalarType::ComplexDouble : ScalarType::ComplexFloat;
}

inline void setDefaultFloatType(ScalarType t) { gDefaultFloatType.store(t, std::memory_order_relaxed); }

} // namespace kiln
