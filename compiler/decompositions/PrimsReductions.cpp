// Core ATen -> Prims: reductions (sum, mean, prod, amax/amin, max/min, argmax/argmin, var/std,
// vector norm, logsumexp, all/any), softmax, log_softmax, layer_norm and cumulative sums and
// products, after torch/_refs: the input converted to the computation dtype (float for 16-bit
// floats), reduced by a prim over explicit dims, kept dims restored with broadcast_in_dim, the
// result converted to PyTorch's result dtype.
#include <cmath>

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

// A reduction's result broadcast back over the reduced dims (for softmax-like ops).
Tensor expandBack(const Tensor& reduced, const Tensor& self, IntArrayRef dims) {
  return broadcastTo(keepDims(reduced, self, dims, true), self.sizes());
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

// The variance (and mean) of a floating tensor in its computation dtype.
struct Moments {
  Tensor var, mean; // over `dims`, dims removed, in the computation dtype
};

Moments moments(const char* op, const Tensor& self, IntArrayRef dims,
                const std::optional<Scalar>& correction, bool withMean) {
  KILN_CHECK(isFloatingType(self.dtype()), op,
             ": std and var only support floating point and complex dtypes");
  Tensor a = convert(self, computationDtype(self.dtype()));
  Moments m;
  m.var = P::var(a, dims, correction ? correction->toDouble() : 1.0);
  if (withMean) {
    Tensor s = P::sum(a, dims);
    m.mean = P::div(s, filledLike(s, double(reductionSize(self, dims))));
  }
  return m;
}

Tensor finishMoment(const Tensor& t, const Tensor& self, IntArrayRef dims, bool keepdim) {
  return convert(keepDims(t, self, dims, keepdim), self.dtype());
}

// max.dim / min.dim: the extremum and the index of its first occurrence.
template <bool isMax>
std::tuple<Tensor, Tensor> extremumDim(const char* op, const Tensor& self, int64_t dim,
                                       bool keepdim) {
  DimVector dims = oneDim(self, dim);
  if (self.dim() == 0) {
    Tensor index = filled(int64_t(0), ScalarType::Int64, deviceOf(self), {});
    return {P::clone(self), index};
  }
  KILN_CHECK_INDEX(self.size(dims[0]) > 0, op, "(): Expected reduction dim ", dims[0],
                   " to have non-zero size.");
  Tensor values = isMax ? P::amax(self, dims) : P::amin(self, dims);
  Tensor indices = isMax ? P::argmax(self, dims[0]) : P::argmin(self, dims[0]);
  return {keepDims(values, self, dims, keepdim), keepDims(indices, self, dims, keepdim)};
}

Tensor extremumAll(const char* op, const Tensor& self, bool isMax) {
  KILN_CHECK(self.numel() > 0, op,
             "(): Expected reduction dim to be specified for input.numel() == 0. Specify the "
             "reduction dim with the 'dim' argument.");
  DimVector dims = reductionDims(self, std::nullopt);
  return isMax ? P::amax(self, dims) : P::amin(self, dims);
}

Tensor argExtremum(const Tensor& self, std::optional<int64_t> dim, bool keepdim, bool isMax) {
  if (!dim) {
    Tensor r = isMax ? P::argmax(self, std::nullopt) : P::argmin(self, std::nullopt);
    return keepDims(r, self, reductionDims(self, std::nullopt), keepdim);
  }
  DimVector dims = oneDim(self, *dim);
  if (dims.empty()) { // a 0-d tensor: index 0 (after the eager op's checks)
    Tensor r = isMax ? P::argmax(self, std::nullopt) : P::argmin(self, std::nullopt);
    return r;
  }
  Tensor r = isMax ? P::argmax(self, dims[0]) : P::argmin(self, dims[0]);
  return keepDims(r, self, dims, keepdim);
}

// all: no zero among the elements; any: some nonzero. Counting keeps empty reductions right
// (all of nothing is true). uint8 inputs give uint8 results, as PyTorch's do.
Tensor logicalReduction(const Tensor& self, IntArrayRef dims, bool keepdim, bool isAll) {
  Tensor b = self.dtype() == ScalarType::Bool ? self : P::ne(self, filledLike(self, 0));
  if (isAll) b = P::bitwise_not(b);
  Tensor count = P::sum(convert(b, ScalarType::Int64), dims);
  Tensor zero = filledLike(count, 0);
  Tensor r = isAll ? P::eq(count, zero) : P::ne(count, zero);
  r = keepDims(r, self, dims, keepdim);
  return self.dtype() == ScalarType::UInt8 ? convert(r, ScalarType::UInt8) : r;
}

// softmax / log_softmax over one dim in the computation dtype (torch/_refs).
Tensor softmaxImpl(const char* op, const Tensor& self, int64_t dim,
                   std::optional<ScalarType> dtype, bool logOf) {
  ScalarType result = dtype.value_or(self.dtype());
  KILN_CHECK(isFloatingType(result), op, ": expected a floating point input (or dtype), got ",
             scalarTypeName(result));
  DimVector dims = oneDim(self, dim);
  Tensor a = convert(self, computationDtype(result));
  Tensor shifted = a;
  if (a.numel() > 0) shifted = P::sub(a, expandBack(P::amax(a, dims), a, dims));
  Tensor e = P::exp(shifted);
  Tensor total = expandBack(P::sum(e, dims), a, dims);
  Tensor r = logOf ? P::sub(shifted, P::log(total)) : P::div(e, total);
  return convert(r, result);
}

// Cumulative sums/products as a masked reduction (torch/_refs): out[.., i, ..] combines
// x[.., j, ..] for j <= i, with a [n, n] lower-triangular mask made from iota.
Tensor cumulative(const Tensor& self, int64_t dim, std::optional<ScalarType> dtype, bool isSum) {
  ScalarType result = sumDtype(self, dtype);
  Tensor a = convert(self, computationDtype(result));
  int64_t d = wrapDim(dim, std::max<int64_t>(self.dim(), 1));
  if (self.dim() == 0) return convert(a.isSame(self) ? P::clone(a) : a, result);
  int64_t n = self.size(d);
  Device device = deviceOf(self);
  Tensor iota = P::iota(n, 0, 1, ScalarType::Int64, device);
  std::vector<int64_t> square{n, n};
  Tensor rows = P::broadcast_in_dim(iota, square, std::vector<int64_t>{0});
  Tensor cols = P::broadcast_in_dim(iota, square, std::vector<int64_t>{1});
  Tensor mask = P::le(cols, rows);
  DimVector shape(a.sizes());
  shape.insert(size_t(d + 1), n);
  std::vector<int64_t> inputDims;
  for (int64_t k = 0; k < a.dim(); ++k)
    inputDims.push_back(k < d ? k : k + 1);
  Tensor spread = P::broadcast_in_dim(a, shape, inputDims);
  Tensor spreadMask = P::broadcast_in_dim(mask, shape, std::vector<int64_t>{d, d + 1});
  Tensor identity = filled(isSum ? 0 : 1, a.dtype(), device, shape);
  Tensor masked = P::where(spreadMask, spread, identity);
  std::vector<int64_t> inner{d + 1};
  Tensor r = isSum ? P::sum(masked, inner) : P::prod(masked, inner);
  return convert(r, result);
}

} // namespace

// -- sums, means, products ------------------------------------------------------------------

Tensor sum(const Tensor& self, std::optional<ScalarType> dtype) {
  return reduce(P::sum, self, reductionDims(self, std::nullopt), false, sumDtype(self, dtype));
}

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

Tensor max(const Tensor& self) { return extremumAll("max", self, true); }
Tensor min(const Tensor& self) { return extremumAll("min", self, false); }

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
  DimVector dims = reductionDims(self, dim);
  return finishMoment(moments("var", self, dims, correction, false).var, self, dims, keepdim);
}

Tensor stdCorrection(const Tensor& self, std::optional<IntArrayRef> dim,
                     const std::optional<Scalar>& correction, bool keepdim) {
  DimVector dims = reductionDims(self, dim);
  Tensor var = moments("std", self, dims, correction, false).var;
  return finishMoment(P::sqrt(var), self, dims, keepdim);
}

std::tuple<Tensor, Tensor> varMeanCorrection(const Tensor& self, std::optional<IntArrayRef> dim,
                                             const std::optional<Scalar>& correction,
                                             bool keepdim) {
  DimVector dims = reductionDims(self, dim);
  Moments m = moments("var_mean", self, dims, correction, true);
  return {finishMoment(m.var, self, dims, keepdim), finishMoment(m.mean, self, dims, keepdim)};
}

std::tuple<Tensor, Tensor> stdMeanCorrection(const Tensor& self, std::optional<IntArrayRef> dim,
                                             const std::optional<Scalar>& correction,
                                             bool keepdim) {
  DimVector dims = reductionDims(self, dim);
  Moments m = moments("std_mean", self, dims, correction, true);
  return {finishMoment(P::sqrt(m.var), self, dims, keepdim),
          finishMoment(m.mean, self, dims, keepdim)};
}

// -- norms and log-sum-exp ------------------------------------------------------------------

Tensor linalgVectorNorm(const Tensor& self, const Scalar& ord, std::optional<IntArrayRef> dim,
                        bool keepdim, std::optional<ScalarType> dtype) {
  KILN_CHECK(isFloatingType(self.dtype()),
             "linalg.vector_norm: Expected a floating point or complex tensor as input. Got ",
             scalarTypeShortName(self.dtype()));
  ScalarType result = dtype.value_or(self.dtype());
  DimVector dims = reductionDims(self, dim);
  Tensor x = convert(self, computationDtype(result));
  double p = ord.toDouble();
  Tensor r;
  if (p == 0) {
    r = P::sum(convert(P::ne(x, filledLike(x, 0)), x.dtype()), dims);
  } else if (std::isinf(p)) {
    KILN_CHECK(self.numel() > 0 || reductionSize(self, dims) > 0,
               "linalg.vector_norm cannot compute the ", p > 0 ? "inf" : "-inf",
               " norm on an empty tensor because the operation does not have an identity");
    r = p > 0 ? P::amax(P::abs(x), dims) : P::amin(P::abs(x), dims);
  } else {
    Tensor a = P::abs(x);
    if (p == 1) {
      r = P::sum(a, dims);
    } else if (p == 2) {
      r = P::sqrt(P::sum(P::mul(a, a), dims));
    } else {
      Tensor s = P::sum(P::pow(a, filledLike(a, p)), dims);
      r = P::pow(s, filledLike(s, 1.0 / p));
    }
  }
  return convert(keepDims(r, self, dims, keepdim), result);
}

// log(sum(exp(x - m))) + m with m the max (0 where it is infinite), after torch/_refs.
Tensor logsumexp(const Tensor& self, IntArrayRef dim, bool keepdim) {
  ScalarType result = isFloatingType(self.dtype()) ? self.dtype() : kDefaultFloat;
  DimVector dims = reductionDims(self, dim);
  Tensor a = convert(self, computationDtype(result));
  Tensor r;
  if (reductionSize(self, dims) == 0 || a.numel() == 0) {
    r = P::log(P::sum(P::exp(a), dims));
  } else {
    Tensor m = P::amax(a, dims);
    m = P::where(P::eq(P::abs(m), filledLike(m, INFINITY)), filledLike(m, 0), m);
    Tensor shifted = P::sub(a, expandBack(m, a, dims));
    r = P::add(P::log(P::sum(P::exp(shifted), dims)), m);
  }
  return convert(keepDims(r, self, dims, keepdim), result);
}

// -- all / any ------------------------------------------------------------------------------

Tensor all(const Tensor& self) {
  return logicalReduction(self, reductionDims(self, std::nullopt), false, true);
}
Tensor allDim(const Tensor& self, int64_t dim, bool keepdim) {
  return logicalReduction(self, oneDim(self, dim), keepdim, true);
}
Tensor allDims(const Tensor& self, std::optional<IntArrayRef> dim, bool keepdim) {
  return logicalReduction(self, reductionDims(self, dim), keepdim, true);
}
Tensor any(const Tensor& self) {
  return logicalReduction(self, reductionDims(self, std::nullopt), false, false);
}
Tensor anyDim(const Tensor& self, int64_t dim, bool keepdim) {
  return logicalReduction(self, oneDim(self, dim), keepdim, false);
}
Tensor anyDims(const Tensor& self, std::optional<IntArrayRef> dim, bool keepdim) {
  return logicalReduction(self, reductionDims(self, dim), keepdim, false);
}

// -- softmax, normalization -----------------------------------------------------------------

Tensor softmax(const Tensor& self, int64_t dim, std::optional<ScalarType> dtype) {
  return softmaxImpl("softmax", self, dim, dtype, false);
}

Tensor logSoftmax(const Tensor& self, int64_t dim, std::optional<ScalarType> dtype) {
  return softmaxImpl("log_softmax", self, dim, dtype, true);
}

// (x - mean) * rsqrt(biased var + eps) * weight + bias over the trailing normalized_shape dims,
// in the computation dtype (torch/_refs native_layer_norm).
Tensor layerNorm(const Tensor& input, IntArrayRef normalizedShape,
                 const std::optional<Tensor>& weight, const std::optional<Tensor>& bias,
                 double eps) {
  int64_t axis = input.dim() - int64_t(normalizedShape.size());
  bool matches = !normalizedShape.empty() && axis >= 0;
  for (size_t i = 0; matches && i < normalizedShape.size(); ++i)
    matches = input.size(axis + int64_t(i)) == normalizedShape[i];
  KILN_CHECK(matches, "Given normalized_shape=", shapeString(normalizedShape),
             ", expected input with shape [*, ",
             shapeString(normalizedShape).substr(1), ", but got input of size",
             input.shapeString());
  DimVector dims;
  for (int64_t d = axis; d < input.dim(); ++d)
    dims.push_back(d);
  ScalarType compute = computationDtype(input.dtype());
  Tensor x = convert(input, compute);
  Tensor mean = P::sum(x, dims);
  mean = P::div(mean, filledLike(mean, double(reductionSize(input, dims))));
  Tensor var = P::var(x, dims, 0.0);
  Tensor rstd = P::rsqrt(P::add(var, filledLike(var, eps)));
  Tensor out = P::mul(P::sub(x, expandBack(mean, x, dims)), expandBack(rstd, x, dims));
  if (weight) out = P::mul(out, broadcastTo(convert(*weight, compute), out.sizes()));
  if (bias) out = P::add(out, broadcastTo(convert(*bias, compute), out.sizes()));
  return convert(out, input.dtype());
}

// -- cumulative -----------------------------------------------------------------------------

Tensor cumsum(const Tensor& self, int64_t dim, std::optional<ScalarType> dtype) {
  return cumulative(self, dim, dtype, true);
}

Tensor cumprod(const Tensor& self, int64_t dim, std::optional<ScalarType> dtype) {
  return cumulative(self, dim, dtype, false);
}

} // namespace kiln::decompositions
