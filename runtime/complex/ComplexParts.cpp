// Helpers of the Complex key's kernels (see ComplexParts.h).
#include "runtime/complex/ComplexParts.h"

#include "generated/Ops.h"
#include "runtime/Error.h"
#include "runtime/TensorIterator.h"

namespace kiln::complex {

namespace {
Tensor inType(const Tensor& t, ScalarType real) {
  return t.dtype() == real ? t : ops::_to_copy(t, real, std::nullopt);
}
} // namespace

Parts partsOf(const Tensor& t, ScalarType real) {
  if (t.isWrappedNumber()) {
    // A Python number: its parts stay numbers (graph constants, promoting as numbers do).
    if (!isComplexType(t.dtype())) return {t, Tensor()};
    const double* pair = t.data<double>();
    return {Tensor::wrapScalar(Scalar(pair[0])), Tensor::wrapScalar(Scalar(pair[1]))};
  }
  if (!isComplexType(t.dtype())) return {inType(t, real), Tensor()};
  Tensor pairs = ops::view_as_real(t);
  return {inType(ops::select(pairs, -1, 0), real), inType(ops::select(pairs, -1, 1), real)};
}

Tensor fromParts(const Tensor& re, const Tensor& im) {
  Tensor imag = im.defined() ? im : ops::zeros_like(re, std::nullopt, std::nullopt);
  if (!(re.sizes() == imag.sizes())) {
    DimVector shape = broadcastShapes("complex", re.sizes(), imag.sizes());
    return ops::view_as_complex(
        ops::stack({ops::expand(re, shape), ops::expand(imag, shape)}, -1));
  }
  return ops::view_as_complex(ops::stack({re, imag}, -1));
}

ScalarType complexResultType(const char* op, const std::vector<Tensor>& operands) {
  ScalarType t = resultType(operands);
  KILN_CHECK(isComplexType(t), op, ": expected a complex result type, got ", scalarTypeName(t));
  return t;
}

int64_t realViewDim(int64_t dim, int64_t ndim) { return wrapDim(dim, ndim == 0 ? 1 : ndim); }

} // namespace kiln::complex
