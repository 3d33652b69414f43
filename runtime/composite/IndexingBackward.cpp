// Gradients of the indexing, sorting and scan ops that need more than one expression, written in
// ops so that they are differentiable in turn (the derivatives: entries of the op table call them).
#include "generated/KernelDecls.h"
#include "generated/Ops.h"
#include "runtime/TensorIterator.h"
#include <cstdint>
#include <limits>

namespace kiln::kernels {

namespace {

Tensor zerosOf(IntArrayRef sizes, const Tensor& like) {
  return ops::zeros(sizes, like.dtype(), like.device());
}

// Sums t over dim in reverse order: out[i] = sum_{k >= i} t[k].
Tensor reverseCumsum(const Tensor& t, int64_t dim) {
  return ops::flip(ops::cumsum(ops::flip(t, {dim}), dim), {dim});
}

// The most negative finite value of a floating dtype: log(0) stand-in that stays finite, so that
// subtracting an infinite result gives an infinity rather than NaN.
Scalar lowestFinite(ScalarType t) {
  switch (t) {
  case ScalarType::Float64: return Scalar(std::numeric_limits<double>::lowest());
  case ScalarType::Float16: return Scalar(-65504.0);
  case ScalarType::BFloat16: return Scalar(-3.38953138925153547590e38);
  default: return Scalar(double(std::numeric_limits<float>::lowest()));
  }
}

} // namespace

Tensor valueSelectingReductionBackward(const Tensor& grad, int64_t dim, const Tensor& indices,
                                       IntArrayRef sizes, bool keepdim) {
  Tensor g = grad, ix = indices;
  if (!keepdim && !sizes.empty()) {
    g = ops::unsqueeze(g, dim);
    ix = ops::unsqueeze(ix, dim);
  }
  return ops::scatter(zerosOf(sizes, grad), dim, ix, g);
}

std::vector<Tensor> scatterReduceBackward(const Tensor& grad, const Tensor& self, int64_t dim,
                                          const Tensor& index, const Tensor& src,
                                          const std::string& reduce, bool includeSelf,
                                          const Tensor& result) {
  Tensor gradSelf, gradSrc;
  Scalar zero(int64_t(0)), one(int64_t(1));
  if (reduce == "sum") {
    gradSelf = grad;
    gradSrc = ops::gather(grad, dim, index);
  } else if (reduce == "prod") {
    // Products without the element itself, computed exactly where self or src holds zeros.
    Tensor maskedSelf = ops::masked_fill(self, ops::eq(self, zero), one);
    Tensor maskedSelfResult = ops::scatter_reduce(maskedSelf, dim, index, src, reduce, includeSelf);
    gradSelf = ops::div(ops::mul(grad, maskedSelfResult), maskedSelf);
    Tensor srcZero = ops::eq(src, zero);
    Tensor srcZeros = ops::gather(
        ops::scatter_add(ops::zeros_like(self), dim, index, ops::to(srcZero, self.dtype())), dim,
        index);
    Tensor srcSingleZero = ops::logical_and(srcZero, ops::eq(srcZeros, one));
    Tensor maskedSrc = ops::masked_fill(src, srcSingleZero, one);
    Tensor maskedSrcResult = ops::scatter_reduce(self, dim, index, maskedSrc, reduce, includeSelf);
    gradSrc = ops::where(srcSingleZero, ops::gather(ops::mul(grad, maskedSrcResult), dim, index),
                         ops::div(ops::gather(ops::mul(grad, result), dim, index),
                                  ops::masked_fill(src, srcZero, one)));
  } else if (reduce == "mean") {
    Tensor n = includeSelf ? ops::ones_like(grad) : ops::zeros_like(grad);
    n = ops::scatter_add(n, dim, index, ops::ones_like(src));
    n = ops::masked_fill(n, ops::eq(n, zero), one);
    gradSelf = ops::div(grad, n);
    gradSrc = ops::div(ops::gather(grad, dim, index), ops::gather(n, dim, index));
  } else if (reduce == "amax" || reduce == "amin") {
    // The gradient is shared equally by every element equal to the result.
    Tensor value = ops::gather(result, dim, index);
    Tensor selfIsResult = ops::eq(self, result);
    Tensor srcIsResult = ops::eq(src, value);
    Tensor count = ops::scatter_add(ops::to(selfIsResult, grad.dtype()), dim, index,
                                    ops::to(srcIsResult, grad.dtype()));
    Tensor share = ops::div(grad, count);
    gradSelf = ops::mul(selfIsResult, share);
    gradSrc = ops::mul(srcIsResult, ops::gather(share, dim, index));
  } else {
    throw Error(strCat("scatter_reduce(): expected reduce to be one of sum, prod, mean, amax, "
                       "amin, got ", reduce));
  }
  if (!includeSelf) gradSelf = ops::scatter(gradSelf, dim, index, zero);
  return {gradSelf, gradSrc};
}

Tensor maskedSelectBackward(const Tensor& grad, const Tensor& input, const Tensor& mask) {
  DimVector shape = broadcastShapes("masked_select_backward", input.sizes(), mask.sizes());
  return ops::masked_scatter(zerosOf(shape, grad), mask, grad);
}

// Static shapes, so that a compiled graph can trace it on meta tensors (masked_select's size
// depends on the mask's values): the k-th masked element of grad goes to position k of the
// source through a scatter_add whose unmasked elements land in one extra, dropped slot.
Tensor maskedScatterBackward(const Tensor& gradOutput, const Tensor& mask, IntArrayRef sizes) {
  int64_t numel = computeNumel(sizes);
  Tensor flatMask = ops::reshape(ops::expand(mask, gradOutput.sizes()), {-1});
  Tensor position = ops::sub(ops::cumsum(flatMask, 0, ScalarType::Int64), Scalar(1));
  Tensor index = ops::masked_fill(position, ops::logical_not(flatMask), Scalar(numel));
  Tensor slots = ops::scatter_add(zerosOf({numel + 1}, gradOutput), 0, index,
                                  ops::reshape(gradOutput, {-1}));
  return ops::reshape(ops::narrow(slots, 0, 0, numel), sizes);
}

Tensor cumprodBackward(const Tensor& grad, const Tensor& self, int64_t dim, const Tensor& result) {
  KILN_CHECK(grad.dtype() != ScalarType::Bool && self.dtype() != ScalarType::Bool,
             "cumprod_backward(): bool tensors have no gradient");
  if (self.numel() == 0) return ops::zeros_like(self, grad.dtype());
  dim = wrapDim(dim, self.dim());
  // Before a row's first zero: sum_{k >= i} grad_k out_k / x_i. At the first zero z: the same
  // sum with x_z taken as 1 (out_k recomputed). After it every output is 0 for any x_i: 0.
  Scalar zero(int64_t(0)), one(int64_t(1));
  Tensor isZero = ops::eq(self, zero);
  Tensor zerosSoFar = ops::cumsum(isZero, dim);
  Tensor beforeZero = ops::eq(zerosSoFar, zero);
  Tensor firstZero = ops::logical_and(isZero, ops::eq(zerosSoFar, one));
  Tensor safeSelf = ops::where(beforeZero, self, ops::ones_like(self));
  Tensor before = ops::div(reverseCumsum(ops::mul(grad, result), dim), safeSelf);
  Tensor withOne = ops::cumprod(ops::masked_fill(self, firstZero, one), dim);
  Tensor atZero = reverseCumsum(ops::mul(grad, ops::masked_fill(withOne, beforeZero, zero)), dim);
  Tensor afterBefore = ops::masked_fill(atZero, ops::logical_not(firstZero), zero);
  return ops::where(beforeZero, before, afterBefore);
}

// Each output's gradient goes to the input position its running extremum came from.
Tensor cummaxminBackward(const Tensor& grad, const Tensor& input, const Tensor& indices,
                         int64_t dim) {
  if (input.numel() == 0) return input; // as PyTorch's (an empty gradient either way)
  return ops::scatter_add(ops::zeros_like(input, grad.dtype()), dim, indices, grad);
}

// d out_k / d x_i = exp(x_i - out_k) for k >= i, so grad_i = sum_{k >= i} g_k exp(x_i - out_k).
// The positive and negative parts of g are summed apart in log space (log|g_k| - out_k through a
// reverse logcumsumexp), as PyTorch's logcumsumexp_backward does: no overflow where out is large,
// no log of zero or of a negative gradient.
Tensor logcumsumexpBackward(const Tensor& grad, const Tensor& input, const Tensor& result,
                            int64_t dim) {
  if (grad.dim() == 0 || grad.numel() == 0) return grad;
  auto reverseLogcumsumexp = [dim](const Tensor& t) {
    return ops::flip(ops::logcumsumexp(ops::flip(t, {dim}), dim), {dim});
  };
  Tensor lowest = ops::full_like(grad, lowestFinite(grad.dtype()));
  Tensor logAbs = ops::log(ops::abs(grad));
  Scalar zero(0.0);
  Tensor logPositive = ops::where(ops::gt(grad, zero), logAbs, lowest);
  Tensor logNegative = ops::where(ops::lt(grad, zero), logAbs, lowest);
  Tensor positive = ops::exp(ops::add(reverseLogcumsumexp(ops::sub(logPositive, result)), input));
  Tensor negative = ops::exp(ops::add(reverseLogcumsumexp(ops::sub(logNegative, result)), input));
  return ops::sub(positive, negative);
}

} // namespace kiln::kernels
