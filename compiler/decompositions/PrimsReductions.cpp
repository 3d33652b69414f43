// Core ATen -> Prims: reductions (sum, mean, prod, amax/amin, max/min.dim, argmax/argmin, var,
// any), after torch/_refs: the input converted to the
// computation dtype (float for 16-bit floats), reduced by a prim over explicit dims, kept dims
// restored with broadcast_in_dim, the result converted to PyTorch's result dtype.
#include <cstdint>
#include <algorithm>

#include "compiler/decompositions/PrimsCommon.h"
#include "generated/DecompositionDecls.h"

namespace kiln::decompositions {

namespace P = kiln::ops::prims;

namespace {

using ReducePrim = Tensor (*)(const Tensor&, std::optional<IntArrayRef>, std::optional<ScalarType>);

// torch/_refs _reduction: compute in the computation dtype, keep dims, convert to the result.
Tensor reduce(ReducePrim prim, const Tensor& self, IntArrayRef dims, bool keepdim,
              ScalarType resultDtype) {
  Tensor a = convert(self, computationDtype(resultDtype));
  Tensor r = prim(a, dims, std::nullopt);
  return convert(keepDims(r, self, dims, keepdim), resultDtype);
}

// Sums and products of integers and bools accumulate in int64 (PyTorch's default dtype).
ScalarType sumDtype(const Tensor& self, std::optional<ScalarType> dtype) {
  if (dtype) return *dtype;
  return isIntegralType(self.dtype(), true) ? ScalarType::Int64 : self.dtype();
}

DimVector oneDim(const Tensor& self, int64_t dim) { return reductionDims(self, IntArrayRef{dim}); }

Tensor meanImpl(const Tensor& self, IntArrayRef dims, bool keepdim,
                std::optional<ScalarType> dtype) {
  ScalarType result = dtype.value_or(self.dtype());
  KILN_CHECK(isFloatingType(result),
             "mean(): could not infer output dtype. Input dtype must be either a floating point "
             "or complex dtype. Got: ",
             scalarTypeShortName(result));
  Tensor a = convert(self, computationDtype(result));
  Tensor s = P::sum(a, dims);
  s = P::div(s, filledLike(s, double(reductionSize(self, dims))));
  return convert(keepDims(s, self, dims, keepdim), result);
}

// var in the computation dtype (float for 16-bit floats), converted back (torch/_refs var).
Tensor variance(const Tensor& self, IntArrayRef dims, const std::optional<Scalar>& correction,
                bool keepdim) {
  KILN_CHECK(isFloatingType(self.dtype()), "std and var only support floating point and complex dtypes");
  Tensor a = convert(self, computationDtype(self.dtype()));
  Tensor var = P::var(a, dims, correction ? correction->toDouble() : 1.0);
  return convert(keepDims(var, self, dims, keepdim), self.dtype());
}

// max.dim / min.dim: the extremum and the index of its first occurrence.
template <bool isMax>
std::tuple<Tensor, Tensor> extremumDim(const char* op, const Tensor& self, int64_t dim,
                                       bool keepdim) {
  DimVector dims = oneDim(self, dim);
  if (self.dim() == 0) {
    Tensor index = filled(int64_t(0), ScalarType::Int64, self.device(), {});
    return {P::clone(self), index};
  }
  KILN_CHECK_INDEX(self.size(dims[0]) > 0, op, "(): Expected reduction dim ", dims[0],
                   " to have non-zero size.");
  Tensor values = isMax ? P::amax(self, dims) : P::amin(self, dims);
  // argmax/argmin take no bools: as uint8 the first extremum is at the same place.
  Tensor key = self.dtype() == ScalarType::Bool ? convert(self, ScalarType::UInt8) : self;
  Tensor indices = isMax ? P::argmax(key, dims[0]) : P::argmin(key, dims[0]);
  return {keepDims(values, self, dims, keepdim), keepDims(indices, self, dims, keepdim)};
}

Tensor argExtremum(const Tensor& self, std::optional<int64_t> dim, bool keepdim, bool isMax) {
  if (!dim) {
    Tensor r = isMax ? P::argmax(self, std::nullopt) : P::argmin(self, std::nullopt);
    return keepDims(r, self, reductionDims(self, std::nullopt), keepdim);
  }
  DimVector dims = oneDim(self, *dim);
  if (dims.empty()) // a 0-d tensor: index 0
    return isMax ? P::argmax(self, std::nullopt) : P::argmin(self, std::nullopt);
  Tensor r = isMax ? P::argmax(self, dims[0]) : P::argmin(self, dims[0]);
  return keepDims(r, self, dims, keepdim);
}

// any: some element is nonzero, counted (torch/_refs any), so that an empty reduction is false.
// uint8 inputs give uint8 results, as PyTorch's do.
Tensor anyImpl(const Tensor& self, IntArrayRef dims, bool keepdim) {
  Tensor b = self.dtype() == ScalarType::Bool ? self : P::ne(self, filledLike(self, 0));
  Tensor count = P::sum(convert(b, ScalarType::Int64), dims);
  Tensor r = keepDims(P::ne(count, filledLike(count, 0)), self, dims, keepdim);
  return self.dtype() == ScalarType::UInt8 ? convert(r, ScalarType::UInt8) : r;
}

} // namespace

// -- sums, means, products ------------------------------------------------------------------

Tensor sumDim(const Tensor& self, std::optional<IntArrayRef> dim, bool keepdim,
              std::optional<ScalarType> dtype) {
  return reduce(P::sum, self, reductionDims(self, dim), keepdim, sumDtype(self, dtype));
}

Tensor mean(const Tensor& self, std::optional<ScalarType> dtype) {
  return meanImpl(self, reductionDims(self, std::nullopt), false, dtype);
}

Tensor meanDim(const Tensor& self, std::optional<IntArrayRef> dim, bool keepdim,
               std::optional<ScalarType> dtype) {
  return meanImpl(self, reductionDims(self, dim), keepdim, dtype);
}

Tensor prod(const Tensor& self, std::optional<ScalarType> dtype) {
  return reduce(P::prod, self, reductionDims(self, std::nullopt), false, sumDtype(self, dtype));
}

Tensor prodDim(const Tensor& self, int64_t dim, bool keepdim, std::optional<ScalarType> dtype) {
  return reduce(P::prod, self, oneDim(self, dim), keepdim, sumDtype(self, dtype));
}

// -- extrema --------------------------------------------------------------------------------

Tensor amax(const Tensor& self, IntArrayRef dim, bool keepdim) {
  DimVector dims = reductionDims(self, dim);
  return keepDims(P::amax(self, dims), self, dims, keepdim);
}

Tensor amin(const Tensor& self, IntArrayRef dim, bool keepdim) {
  DimVector dims = reductionDims(self, dim);
  return keepDims(P::amin(self, dims), self, dims, keepdim);
}


std::tuple<Tensor, Tensor> maxDim(const Tensor& self, int64_t dim, bool keepdim) {
  return extremumDim<true>("max", self, dim, keepdim);
}

std::tuple<Tensor, Tensor> minDim(const Tensor& self, int64_t dim, bool keepdim) {
  return extremumDim<false>("min", self, dim, keepdim);
}

Tensor argmax(const Tensor& self, std::optional<int64_t> dim, bool keepdim) {
  return argExtremum(self, dim, keepdim, true);
}

Tensor argmin(const Tensor& self, std::optional<int64_t> dim, bool keepdim) {
  return argExtremum(self, dim, keepdim, false);
}

// -- moments --------------------------------------------------------------------------------

Tensor varCorrection(const Tensor& self, std::optional<IntArrayRef> dim,
                     const std::optional<Scalar>& correction, bool keepdim) {
  return variance(self, reductionDims(self, dim), correction, keepdim);
}

// -- any ------------------------------------------------------------------------------------

Tensor any(const Tensor& self) { return anyImpl(self, reductionDims(self, std::nullopt), false); }
Tensor anyDim(const Tensor& self, int64_t dim, bool keepdim) {
  return anyImpl(self, oneDim(self, dim), keepdim);
}
Tensor anyDims(const Tensor& self, std::optional<IntArrayRef> dim, bool keepdim) {
  return anyImpl(self, reductionDims(self, dim), keepdim);
}

} // namespace kiln::decompositions
