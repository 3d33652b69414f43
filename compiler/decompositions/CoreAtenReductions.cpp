// Non-core reductions in core ATen ops, following torch/_decomp/decompositions.py (_softmax,
// _log_softmax, logsumexp) and torch/_refs (std, var_mean, vector_norm, all).
#include "compiler/decompositions/CoreAtenSupport.h"
#include "runtime/DefaultDtype.h"
#include "generated/DecompositionDecls.h"

#include <cstdint>
#include <cmath>
#include <limits>

namespace kiln::decompositions {

namespace {

// all() of uint8 is uint8 in PyTorch (bool for every other dtype).
Tensor allResult(const Tensor& self, const Tensor& r) {
  return self.dtype() == ScalarType::UInt8 ? ops::_to_copy(r, ScalarType::UInt8) : r;
}

} // namespace

Tensor softmax(const Tensor& self, int64_t dim, std::optional<ScalarType> dtype) {
  Tensor x = dtype ? convert(self, *dtype) : self;
  ScalarType resultDtype = x.dtype();
  x = convert(x, computationDtype(resultDtype));
  Tensor unnormalized =
      x.numel() == 0 ? ops::exp(x) : ops::exp(ops::sub(x, ops::amax(x, {dim}, true)));
  Tensor result = ops::div(unnormalized, ops::sum(unnormalized, IntArrayRef{dim}, true));
  return convert(result, resultDtype);
}

Tensor logSoftmax(const Tensor& self, int64_t dim, std::optional<ScalarType> dtype) {
  Tensor x = dtype ? convert(self, *dtype) : self;
  ScalarType resultDtype = x.dtype();
  x = convert(x, computationDtype(resultDtype));
  Tensor shifted = x.numel() == 0 ? x : ops::sub(x, ops::amax(x, {dim}, true));
  Tensor logSum = ops::log(ops::sum(ops::exp(shifted), IntArrayRef{dim}, true));
  return convert(ops::sub(shifted, logSum), resultDtype);
}

Tensor logsumexp(const Tensor& self, IntArrayRef dim, bool keepdim) {
  // Integers and bool give the default float dtype.
  Tensor x = isFloatingType(self.dtype()) ? self : convert(self, defaultFloatType());
  if (x.numel() == 0) return ops::log(ops::sum(ops::exp(x), dim, keepdim));
  Tensor maxes = ops::amax(x, dim, true);
  // An infinite maximum would give inf - inf = nan; shifting by 0 there is exact.
  maxes = ops::masked_fill(maxes, ops::eq(ops::abs(maxes), std::numeric_limits<double>::infinity()),
                           Scalar(0.0));
  Tensor result = ops::log(ops::sum(ops::exp(ops::sub(x, maxes)), dim, keepdim));
  return ops::add(result, keepdim ? maxes : ops::squeeze(maxes, dim));
}

Tensor stdCorrection(const Tensor& self, std::optional<IntArrayRef> dim,
                     const std::optional<Scalar>& correction, bool keepdim) {
  return ops::sqrt(ops::varCorrection(self, dim, correction, keepdim));
}

std::tuple<Tensor, Tensor> varMeanCorrection(const Tensor& self, std::optional<IntArrayRef> dim,
                                             const std::optional<Scalar>& correction,
                                             bool keepdim) {
  return {ops::varCorrection(self, dim, correction, keepdim), ops::mean(self, dim, keepdim)};
}

std::tuple<Tensor, Tensor> stdMeanCorrection(const Tensor& self, std::optional<IntArrayRef> dim,
                                             const std::optional<Scalar>& correction,
                                             bool keepdim) {
  return {ops::sqrt(ops::varCorrection(self, dim, correction, keepdim)),
          ops::mean(self, dim, keepdim)};
}

Tensor sumAll(const Tensor& self, std::optional<ScalarType> dtype) {
  return ops::sum(self, std::optional<IntArrayRef>(), false, dtype);
}

Tensor maxAll(const Tensor& self) { return ops::amax(self); }

Tensor minAll(const Tensor& self) { return ops::amin(self); }

// all(x) = not any(not x), as torch._refs.all.
Tensor allAll(const Tensor& self) {
  return allResult(self, ops::logical_not(ops::any(ops::logical_not(self))));
}

Tensor allDim(const Tensor& self, int64_t dim, bool keepdim) {
  return allResult(self, ops::logical_not(ops::anyDim(ops::logical_not(self), dim, keepdim)));
}

Tensor allDims(const Tensor& self, std::optional<IntArrayRef> dim, bool keepdim) {
  return allResult(self, ops::logical_not(ops::anyDims(ops::logical_not(self), dim, keepdim)));
}

// torch._refs.linalg.vector_norm: the reduction for the order, over |x| in the computation dtype.
Tensor linalgVectorNorm(const Tensor& self, const Scalar& ord, std::optional<IntArrayRef> dim,
                        bool keepdim, std::optional<ScalarType> dtype) {
  Tensor x = dtype ? convert(self, *dtype) : self;
  ScalarType resultDtype = x.dtype();
  x = convert(x, computationDtype(resultDtype));
  double p = ord.toDouble();
  constexpr double inf = std::numeric_limits<double>::infinity();
  Tensor result;
  if (p == 0) {
    result = ops::sum(convert(ops::ne(x, Scalar(0)), x.dtype()), dim, keepdim);
  } else if (p == inf || p == -inf) {
    IntArrayRef dims = dim ? *dim : IntArrayRef();
    result = p == inf ? ops::amax(ops::abs(x), dims, keepdim) : ops::amin(ops::abs(x), dims, keepdim);
  } else if (p == 1) {
    result = ops::sum(ops::abs(x), dim, keepdim);
  } else if (p == 2) {
    Tensor a = ops::abs(x);
    result = ops::sqrt(ops::sum(ops::mul(a, a), dim, keepdim));
  } else {
    result = ops::pow(ops::sum(ops::pow(ops::abs(x), ord), dim, keepdim), Scalar(1.0 / p));
  }
  return convert(result, resultDtype);
}

} // namespace kiln::decompositions
