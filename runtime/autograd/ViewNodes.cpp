// View and in-place-on-view nodes, written in ops so that they are differentiable themselves.
#include "runtime/autograd/ViewNodes.h"

#include <cstdint>
#include <algorithm>
#include <numeric>

#include "generated/Ops.h"

namespace kiln::autograd {

namespace {

// True when no two elements of the geometry share memory (so a copy equals a sum into it).
bool nonOverlapping(const Geometry& g) {
  std::vector<size_t> dims;
  for (size_t d = 0; d < g.sizes.size(); ++d)
    if (g.sizes[d] > 1) dims.push_back(d);
  std::sort(dims.begin(), dims.end(), [&](size_t a, size_t b) { return g.strides[a] < g.strides[b]; });
  int64_t needed = 1;
  for (size_t d : dims) {
    if (g.strides[d] < needed) return false;
    needed = g.strides[d] * g.sizes[d];
  }
  return true;
}

// A zero tensor with the base's sizes and strides, and the view's geometry inside it.
std::pair<Tensor, Tensor> baseShapedZeros(const Geometry& base, const Geometry& view, ScalarType dtype,
                                          Device device) {
  Tensor z = ops::empty_strided(base.sizes, base.strides, dtype, device);
  ops::zero_(z);
  Tensor inner = ops::as_strided(z, view.sizes, view.strides, view.offset - base.offset + z.storageOffset());
  return {z, inner};
}

} // namespace

std::vector<Tensor> AsStridedBackward::apply(std::vector<Tensor>&& grads) {
  const Tensor& grad = grads.at(0);
  if (!grad.defined()) return {Tensor()};
  return {asStridedGrad(grad, base_, view_)};
}

Tensor asStridedGrad(const Tensor& grad, const Geometry& base_, const Geometry& view_) {
  bool baseOverlaps = !nonOverlapping(base_);
  if (nonOverlapping(view_) && !baseOverlaps) {
    auto [z, inner] = baseShapedZeros(base_, view_, grad.dtype(), grad.device());
    ops::copy_(inner, grad, false);
    return z;
  }
  // Overlapping view (an expand, an unfold): elements that share memory sum their gradients
  // into the storage they share; the base then reads the storage back.
  int64_t span = 1;
  for (size_t d = 0; d < base_.sizes.size(); ++d) span += (base_.sizes[d] - 1) * base_.strides[d];
  int64_t lo = std::min(base_.offset, view_.offset);
  for (size_t d = 0; d < view_.sizes.size(); ++d) span = std::max(span, view_.offset - lo + 1 + (view_.sizes[d] - 1) * view_.strides[d]);
  span += base_.offset - lo;
  Tensor flat = ops::zeros({span}, grad.dtype(), grad.device());
  Tensor positions = ops::as_strided(ops::arange(Scalar(span), ScalarType::Int64, grad.device()),
                                     view_.sizes, view_.strides, view_.offset - lo);
  flat = ops::index_put(flat, {std::optional<Tensor>(ops::reshape(positions, {-1}))},
                        ops::reshape(grad, {-1}), true);
  if (baseOverlaps) {
    // The base itself has several elements on one location (an unfold of an unfold): each gets
    // an equal share of the location's gradient, so that the base's own backward, summing its
    // elements back into storage, counts the location once (as torch's as_strided_backward).
    Tensor basePositions = ops::as_strided(ops::arange(Scalar(span), ScalarType::Int64, grad.device()),
                                           base_.sizes, base_.strides, base_.offset - lo);
    Tensor flatPositions = ops::reshape(basePositions, {-1});
    Tensor count = ops::index_put(ops::zeros({span}, grad.dtype(), grad.device()),
                                  {std::optional<Tensor>(flatPositions)},
                                  ops::ones({flatPositions.numel()}, grad.dtype(), grad.device()), true);
    flat = ops::div(flat, ops::clamp_min(count, Scalar(1.0)));
  }
  return ops::as_strided(flat, base_.sizes, base_.strides, base_.offset - lo);
}

std::vector<Tensor> CopySlices::apply(std::vector<Tensor>&& grads) {
  const Tensor& grad = grads.at(0);
  if (!grad.defined()) return {Tensor(), Tensor()};
  Tensor res = ops::empty_strided(base_.sizes, base_.strides, grad.dtype(), grad.device());
  ops::copy_(res, grad, false);
  Tensor region = ops::as_strided(res, view_.sizes, view_.strides, view_.offset - base_.offset + res.storageOffset());
  Tensor forValue = ops::clone(region);
  ops::zero_(region);
  return {res, forValue};
}

} // namespace kiln::autograd
