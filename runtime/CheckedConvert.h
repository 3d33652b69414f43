// Scalar-to-dtype range checks: PyTorch refuses to store a Python number a dtype cannot hold
// ("value cannot be converted to type uint8_t without overflow") in fills and assignments.
#pragma once
#include "runtime/Scalar.h"

namespace kiln {

// RuntimeError when `value` overflows `dtype`, by c10::checked_convert's rule: nothing overflows
// bool, negative integers may wrap into unsigned types down to -max, floating types keep
// inf and nan, integer types reject both.
void checkScalarFits(const Scalar& value, ScalarType dtype);

} // namespace kiln
