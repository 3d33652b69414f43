// Per-tensor autograd state and how tensors join the backward graph (history, views,
// in-place rebasing).
#include "runtime/autograd/AutogradMeta.h"

#include "runtime/DispatchKey.h"
#include "runtime/autograd/ViewNodes.h"

namespace kiln::autograd {

void destroyAutogradMeta(AutogradMeta* m) {
  // retain_grad's hook points at this tensor: it must not outlive it.
  if (m->retainsGrad && m->gradFn) m->gradFn->clearRetainGradHooks(m->outputNr);
  delete m;
}

AutogradMeta& metaOf(const Tensor& t) {
  auto& slot = t.impl()->autogradMeta;
  if (!slot) slot.reset(new AutogradMeta());
  return *slot;
}

bool isLeaf(const Tensor& t) { return !gradFnOf(t); }

const IntrusivePtr<Node>& gradFnOf(const Tensor& t) {
  static const IntrusivePtr<Node> none;
  AutogradMeta* m = metaIfAny(t);
  if (!m) return none;
  if (m->isView() && t.storage()->version() != m->viewVersion) {
    // The storage was written since this view's history was made: the view now reads the
    // base's current value.
    m->viewVersion = t.storage()->version();
    const Tensor& base = m->viewBase;
    if (base.requiresGrad()) {
      auto node = makeIntrusive<AsStridedBackward>(Geometry::of(base), Geometry::of(t));
      node->setNextEdges({gradientEdge(base)});
      m->gradFn = node;
      m->outputNr = node->addInputMetadata(t);
      t.impl()->requiresGrad = true;
    }
  }
  return m->gradFn;
}

Edge gradientEdge(const Tensor& t) {
  if (!t.defined()) return {};
  if (AutogradMeta* m = metaIfAny(t)) {
    if (const IntrusivePtr<Node>& fn = gradFnOf(t)) return {fn, m->outputNr};
  }
  if (!t.requiresGrad()) return {};
  AutogradMeta& m = metaOf(t);
  if (m.gradAccumulator) return {IntrusivePtr<Node>(m.gradAccumulator), 0};
  auto acc = makeIntrusive<AccumulateGrad>(t.implPtr());
  acc->addInputMetadata(t);
  m.gradAccumulator = acc.get();
  return {acc, 0};
}

void setHistory(const Tensor& t, const IntrusivePtr<Node>& fn) {
  AutogradMeta& m = metaOf(t);
  m.gradFn = fn;
  m.outputNr = fn->addInputMetadata(t);
  if (m.isView()) m.viewVersion = t.storage()->version();
  t.impl()->requiresGrad = true;
}

void markView(const Tensor& view, const Tensor& input) {
  if (!view.defined() || view.isSame(input) || view.storage().get() != input.storage().get()) return;
  AutogradMeta* in = metaIfAny(input);
  AutogradMeta& m = metaOf(view);
  m.viewBase = in && in->isView() ? in->viewBase : input;
  m.viewVersion = view.storage()->version();
}

void rebaseHistory(const Tensor& self, const Tensor& newValue) {
  Edge valueEdge = gradientEdge(newValue);
  AutogradMeta* m = metaIfAny(self);
  if (m && m->isView()) {
    Tensor base = m->viewBase;
    if (!valueEdge.valid() && !base.requiresGrad()) return;
    Geometry baseGeom = Geometry::of(base), viewGeom = Geometry::of(self);
    auto copy = makeIntrusive<CopySlices>(baseGeom, viewGeom);
    copy->setNextEdges({gradientEdge(base), valueEdge});
    setHistory(base, copy);
    auto view = makeIntrusive<AsStridedBackward>(baseGeom, viewGeom);
    view->setNextEdges({Edge{copy, 0}});
    m->gradFn = view;
    m->outputNr = view->addInputMetadata(self);
    m->viewVersion = self.storage()->version();
    self.impl()->requiresGrad = true;
    return;
  }
  if (!valueEdge.valid() && !self.requiresGrad()) return;
  AutogradMeta& sm = metaOf(self);
  if (valueEdge.valid()) {
    sm.gradFn = valueEdge.fn;
    sm.outputNr = valueEdge.inputNr;
  } else {
    // The new value depends on nothing that requires grad: a constant in the graph.
    auto constant = makeIntrusive<IdentityNode>("ConstantBackward0");
    sm.gradFn = constant;
    sm.outputNr = constant->addInputMetadata(self);
  }
  self.impl()->requiresGrad = true;
}

void throwLeafInplace(const char* op) {
  (void)op;
  throw Error("a leaf Variable that requires grad is being used in an in-place operation.");
}

} // namespace kiln::autograd
