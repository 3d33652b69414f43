// Nodes of views and of in-place writes through views: a view's gradient goes back to its
// base through as_strided geometry; an in-place write into a view rewrites the base's history
// (PyTorch's CopySlices).
#pragma once
#include "runtime/autograd/Node.h"
#include <cstdint>

namespace kiln::autograd {

// Sizes, strides and storage offset of a tensor.
struct Geometry {
  DimVector sizes, strides;
  int64_t offset = 0;
  static Geometry of(const Tensor& t) {
    return {DimVector(t.sizes()), DimVector(t.strides()), t.storageOffset()};
  }
};

// The gradient of base for view = as_strided(base, view geometry).
Tensor asStridedGrad(const Tensor& grad, const Geometry& base, const Geometry& view);

// view = as_strided(base, view geometry): the gradient lands in a zero tensor shaped like the base.
class AsStridedBackward final : public Node {
public:
  AsStridedBackward(Geometry base, Geometry view) : base_(std::move(base)), view_(std::move(view)) {}
  std::vector<Tensor> apply(std::vector<Tensor>&& grads) override;
  std::string name() const override { return "AsStridedBackward0"; }

private:
  Geometry base_, view_;
};

// base' = base with the view's elements replaced by a new value: edges (old base, new value).
class CopySlices final : public Node {
public:
  CopySlices(Geometry base, Geometry view) : base_(std::move(base)), view_(std::move(view)) {}
  std::vector<Tensor> apply(std::vector<Tensor>&& grads) override;
  std::string name() const override { return "CopySlices"; }

private:
  Geometry base_, view_;
};

} // namespace kiln::autograd
