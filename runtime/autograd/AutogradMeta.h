// The autograd state of one tensor (grad, grad_fn, hooks, view base) and the functions that
// connect tensors to the backward graph.
#pragma once
#include <cstdint>
#include <vector>

#include "runtime/autograd/Node.h"

namespace kiln::autograd {

struct AutogradMeta {
  Tensor grad;
  IntrusivePtr<Node> gradFn;
  uint32_t outputNr = 0;
  // A leaf's accumulator while some graph holds it (cleared by ~AccumulateGrad).
  AccumulateGrad* gradAccumulator = nullptr;
  std::vector<GradHook> leafHooks; // hooks of a leaf, run before accumulation
  bool retainsGrad = false;
  // A view's root base and the storage version its grad_fn was made at: when the storage was
  // written since (an in-place op on the base or another view), grad_fn is made anew as an
  // as_strided of the base.
  Tensor viewBase;
  uint32_t viewVersion = 0;
  bool isView() const { return viewBase.defined(); }
};

AutogradMeta& metaOf(const Tensor& t);
inline AutogradMeta* metaIfAny(const Tensor& t) { return t.impl()->autogradMeta.get(); }

bool isLeaf(const Tensor& t);
// The node of the tensor's history (regenerating a stale view's), nullptr for a leaf.
const IntrusivePtr<Node>& gradFnOf(const Tensor& t);
// Where a gradient for `t` goes: its grad_fn, or its leaf accumulator when it requires grad.
Edge gradientEdge(const Tensor& t);
// Makes `t` output `outputNr` of `fn` (requires_grad, grad_fn, input metadata).
void setHistory(const Tensor& t, const IntrusivePtr<Node>& fn);
// Records `view` (the output of a view op on `input`) as a view of input's root base.
void markView(const Tensor& view, const Tensor& input);
// After an in-place write into `self` whose new value's history is `newValue`'s: rebase self
// (and, for a view, its base) onto that history.
void rebaseHistory(const Tensor& self, const Tensor& newValue);

// Errors shared by the engine and the kernels (PyTorch's wording).
[[noreturn]] void throwLeafInplace(const char* op);

} // namespace kiln::autograd
