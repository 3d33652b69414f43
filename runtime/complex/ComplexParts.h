// Helpers of the Complex key's kernels: a complex tensor's real and imaginary parts as views of
// view_as_real, and a complex tensor made back from two real ones (docs/complex.md).
#pragma once
#include <vector>

#include "runtime/TensorImpl.h"

namespace kiln::complex {

// The parts of an operand in the real value type `real`: views of a complex tensor (converted
// only where the precision differs), or a real tensor and no imaginary part (im undefined).
struct Parts {
  Tensor re;
  Tensor im;
};
Parts partsOf(const Tensor& t, ScalarType real);

// view_as_complex(stack([re, im], -1)) after broadcasting the two: a new contiguous tensor.
// An undefined im means zeros.
Tensor fromParts(const Tensor& re, const Tensor& im);

// The complex result dtype of an op over these operands (torch's result_type); the op's name
// goes into the error when it is not complex.
ScalarType complexResultType(const char* op, const std::vector<Tensor>& operands);

// A dim of a complex tensor as a dim of its view_as_real (negative dims move past the new
// trailing dim of 2).
int64_t realViewDim(int64_t dim, int64_t ndim);

} // namespace kiln::complex
