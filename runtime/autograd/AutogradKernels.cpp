// The Autograd key's shared machinery: recording outputs, in-place ops (generic and copy_),
// and the fallback that marks outputs of ops without a formula so backward names the op.
#include "runtime/autograd/AutogradKernels.h"

#include "generated/Ops.h"
#include "runtime/Dispatcher.h"
#include "runtime/InplaceFromFunctional.h"

namespace kiln::autograd {

bool anyRequiresGrad(const Value& v) {
  if (v.isTensor()) return v.toTensor().defined() && v.toTensor().requiresGrad();
  if (v.isTensorList()) {
    for (const Tensor& t : v.toTensorList())
      if (t.defined() && t.requiresGrad()) return true;
    return false;
  }
  if (v.isNone()) return false;
  if (v.isOptionalTensorList()) {
    for (const auto& t : v.toOptionalTensorList())
      if (t && t->requiresGrad()) return true;
  }
  return false;
}

void redispatchBelowAutograd(OpId op, Stack& s) {
  const Dispatcher& d = Dispatcher::instance();
  DispatchKeySet keys = d.computeKeys(op, s).below(DispatchKey::Autograd);
  // Ops a kernel calls inside (a copy, a contiguous) are part of this op: they record nothing.
  ExcludeDispatchKeyGuard below(DispatchKey::Autograd);
  d.redispatch(op, keys, s);
}

void markViews(const Stack& s, const Tensor& input) {
  for (const Value& v : s) {
    if (v.isTensor()) markView(v.toTensor(), input);
    else if (v.isTensorList())
      for (const Tensor& t : v.toTensorList()) markView(t, input);
  }
}

void recordOutputs(const Stack& s, const IntrusivePtr<Node>& node, std::vector<bool> differentiable) {
  size_t index = 0;
  auto one = [&](const Tensor& t) {
    bool diff = differentiable.empty() || (index < differentiable.size() && differentiable[index]);
    ++index;
    if (t.defined() && isDifferentiableType(t.dtype()) && diff) setHistory(t, node);
    else if (t.defined()) node->addInputMetadata(t);
    else node->addInputMetadata(Tensor::empty({}, ScalarType::Float32, Device(DeviceType::Meta)));
  };
  for (const Value& v : s) {
    if (v.isTensor()) one(v.toTensor());
    else if (v.isTensorList())
      for (const Tensor& t : v.toTensorList()) one(t);
  }
}

bool anyDefined(const std::vector<Tensor>& grads) {
  for (const Tensor& g : grads)
    if (g.defined()) return true;
  return false;
}

void materializeGrads(std::vector<Tensor>& grads, const std::vector<InputMetadata>& meta) {
  for (size_t i = 0; i < grads.size() && i < meta.size(); ++i)
    if (!grads[i].defined() && isDifferentiableType(meta[i].dtype))
      grads[i] = ops::zeros(meta[i].sizes, meta[i].dtype, meta[i].device);
}

bool anyNeeded(const Node& node, size_t first, size_t count) {
  for (size_t k = 0; k < count; ++k)
    if (node.needsInputGrad(first + k)) return true;
  return false;
}

void throwNoDerivative(const char* op, const char* arg) {
  throw NotImplementedError(strCat("the derivative for '", op, "' with respect to '", arg,
                                   "' is not implemented."));
}

namespace {

bool anyTensorRequiresGrad(OpId op, const Stack& s) {
  const OpSchema& schema = Dispatcher::instance().schema(op);
  for (size_t i = 0; i < schema.args.size() && i < s.size(); ++i) {
    ArgType t = schema.args[i].type;
    if ((t == ArgType::Tensor || t == ArgType::TensorList || t == ArgType::OptionalTensorList) &&
        anyRequiresGrad(s[i]))
      return true;
  }
  return false;
}

void checkInplaceTarget(const Tensor& self, OpId op) {
  if (self.requiresGrad() && isLeaf(self))
    throw Error("a leaf Variable that requires grad is being used in an in-place operation.");
  // Writing through a view of such a leaf would turn the leaf (a parameter) into a non-leaf.
  if (AutogradMeta* m = metaIfAny(self); m && m->isView() && m->viewBase.requiresGrad() && isLeaf(m->viewBase))
    throw Error("a view of a leaf Variable that requires grad is being used in an in-place operation.");
  (void)op;
}

// copy_ under autograd: self takes src's value (cast and broadcast), and its history.
void autogradCopy(Stack& s) {
  Tensor self = s[0].toTensor();
  Tensor src = s[1].toTensor();
  if (!GradMode::isEnabled() || !(self.requiresGrad() || src.requiresGrad() || metaIfAny(self))) {
    redispatchBelowAutograd(OpId::copy_, s);
    return;
  }
  checkInplaceTarget(self, OpId::copy_);
  Tensor value;
  if (src.requiresGrad()) {
    value = src.dtype() == self.dtype() ? src : ops::_to_copy(src, self.dtype());
    if (DimVector(value.sizes()) != DimVector(self.sizes())) value = ops::expand(value, self.sizes());
  }
  redispatchBelowAutograd(OpId::copy_, s);
  rebaseHistory(self, value);
}

// An in-place op with no functional twin (fill_, zero_, random fills): self becomes a constant.
void autogradInplaceOpaque(OpId op, DispatchKeySet remaining, Stack& s) {
  const Dispatcher& d = Dispatcher::instance();
  Tensor self = s[0].toTensor();
  checkInplaceTarget(self, op);
  for (size_t i = 1; i < s.size(); ++i)
    if (anyRequiresGrad(s[i]))
      throw NotImplementedError(strCat("the derivative for '", d.schema(op).qualifiedName(),
                                       "' is not implemented."));
  {
    ExcludeDispatchKeyGuard below(DispatchKey::Autograd);
    d.redispatch(op, remaining, s);
  }
  rebaseHistory(self, Tensor());
}

void autogradFallback(OpId op, DispatchKeySet remaining, Stack& s) {
  const Dispatcher& d = Dispatcher::instance();
  const OpSchema& schema = d.schema(op);
  bool view = schema.hasTag(kTagView);
  Tensor input = view && !s.empty() && s[0].isTensor() ? s[0].toTensor() : Tensor();
  bool record = GradMode::isEnabled() && anyTensorRequiresGrad(op, s) &&
                !schema.hasTag(kTagRandom) && !schema.hasTag(kTagCreation) &&
                schema.derivative != DerivativeKind::NonDifferentiable;
  if (!record) {
    bool mutatesSelf = !schema.args.empty() && schema.args[0].mutated;
    if (mutatesSelf && GradMode::isEnabled() && s[0].isTensor() && metaIfAny(s[0].toTensor()) &&
        metaIfAny(s[0].toTensor())->isView() && metaIfAny(s[0].toTensor())->viewBase.requiresGrad()) {
      autogradInplaceOpaque(op, remaining, s);
      return;
    }
    {
      ExcludeDispatchKeyGuard below(DispatchKey::Autograd);
      d.redispatch(op, remaining, s);
    }
    if (view) markViews(s, input);
    return;
  }
  if (!schema.args.empty() && schema.args[0].mutated) {
    autogradInplaceOpaque(op, remaining, s);
    return;
  }
  auto node = makeIntrusive<NotImplementedNode>(schema.qualifiedName());
  std::vector<Edge> edges;
  for (size_t i = 0; i < schema.args.size(); ++i) {
    const Value& v = s[i];
    if (v.isTensor()) edges.push_back(gradientEdge(v.toTensor()));
    else if (v.isTensorList())
      for (const Tensor& t : v.toTensorList()) edges.push_back(gradientEdge(t));
    else if (!v.isNone() && schema.args[i].type == ArgType::OptionalTensorList)
      for (const auto& t : v.toOptionalTensorList()) edges.push_back(t ? gradientEdge(*t) : Edge());
  }
  node->setNextEdges(std::move(edges));
  {
    ExcludeDispatchKeyGuard below(DispatchKey::Autograd);
    d.redispatch(op, remaining, s);
  }
  if (view) markViews(s, input);
  recordOutputs(s, node);
}

} // namespace

void autogradInplace(OpId inplaceOp, OpId functionalOp, bool functionalSavesSelf, Stack& s) {
  const Dispatcher& d = Dispatcher::instance();
  Tensor self = s[0].toTensor();
  AutogradMeta* m = metaIfAny(self);
  bool viewOfGrad = m && m->isView() && m->viewBase.requiresGrad();
  if (!GradMode::isEnabled() || !(anyTensorRequiresGrad(inplaceOp, s) || viewOfGrad)) {
    redispatchBelowAutograd(inplaceOp, s);
    return;
  }
  checkInplaceTarget(self, inplaceOp);
  if (functionalSavesSelf && self.requiresGrad()) s[0] = Value(ops::clone(self));
  d.call(functionalOp, s);
  Tensor result = s.at(0).toTensor();
  checkInplaceResult(inplaceOp, self, result);
  {
    ExcludeDispatchKeyGuard below(DispatchKey::Autograd);
    ops::copy_(self, result, false);
  }
  rebaseHistory(self, result.requiresGrad() ? result : Tensor());
  s.clear();
  s.emplace_back(std::move(self));
}

void autogradInplaceView(OpId inplaceOp, OpId viewOp, Stack& s) {
  Tensor self = s[0].toTensor();
  if (!GradMode::isEnabled() || !self.requiresGrad()) {
    redispatchBelowAutograd(inplaceOp, s);
    return;
  }
  checkInplaceTarget(self, inplaceOp);
  Stack viewStack = s;
  Dispatcher::instance().call(viewOp, viewStack);
  Tensor view = viewStack.at(0).toTensor();
  redispatchBelowAutograd(inplaceOp, s);
  rebaseHistory(self, view);
}

void registerAutogradKernels(Dispatcher& d) {
  registerGeneratedAutogradKernels(d);
  d.registerKernel(OpId::copy_, DispatchKey::Autograd, autogradCopy);
  d.registerFallback(DispatchKey::Autograd, autogradFallback);
}

} // namespace kiln::autograd
