// Node bookkeeping, hooks, and the built-in nodes (AccumulateGrad, NotImplemented).
#include "runtime/autograd/Node.h"

#include "generated/Ops.h"
#include "runtime/DispatchKey.h"
#include "runtime/autograd/AutogradMeta.h"
#include <cstdint>

namespace kiln::autograd {

namespace {
thread_local uint64_t nextSequenceNr = 0;
} // namespace

Node::Node() : sequenceNr_(nextSequenceNr++) {}
Node::~Node() = default;

uint32_t Node::addInputMetadata(const Tensor& t) {
  inputMeta_.push_back(InputMetadata{DimVector(t.sizes()), t.dtype(), t.device()});
  return uint32_t(inputMeta_.size() - 1);
}

void Node::runPreHooks(std::vector<Tensor>& grads) const {
  for (const auto& [input, hook] : preHooks_) {
    if (input >= grads.size() || !grads[input].defined()) continue;
    Tensor replaced = hook(grads[input]);
    if (replaced.defined()) grads[input] = std::move(replaced);
  }
}

void Node::runRetainGradHooks(const std::vector<Tensor>& grads) const {
  for (const auto& [input, hook] : retainHooks_)
    if (input < grads.size() && grads[input].defined()) hook(grads[input]);
}

void Node::clearRetainGradHooks(uint32_t input) {
  std::erase_if(retainHooks_, [&](const auto& h) { return h.first == input; });
}

void Node::runNodePreHooks(std::vector<Tensor>& grads) const {
  for (const auto& h : nodePreHooks_) h(grads);
}

void Node::runPostHooks(std::vector<Tensor>& gradInputs, const std::vector<Tensor>& gradOutputs) const {
  for (const auto& h : postHooks_) h(gradInputs, gradOutputs);
}

std::vector<Tensor> NotImplementedNode::apply(std::vector<Tensor>&&) {
  throw NotImplementedError(strCat("the derivative for '", op_, "' is not implemented."));
}

AccumulateGrad::AccumulateGrad(IntrusivePtr<TensorImpl> leaf) : leaf_(std::move(leaf)) {}

AccumulateGrad::~AccumulateGrad() {
  if (leaf_ && leaf_->autogradMeta && leaf_->autogradMeta->gradAccumulator == this)
    leaf_->autogradMeta->gradAccumulator = nullptr;
}

std::vector<Tensor> AccumulateGrad::apply(std::vector<Tensor>&& grads) {
  Tensor g = std::move(grads.at(0));
  if (!g.defined()) return {};
  Tensor leaf(leaf_);
  AutogradMeta& meta = metaOf(leaf);
  for (const GradHook& hook : meta.leafHooks) {
    Tensor replaced = hook(g);
    if (replaced.defined()) g = std::move(replaced);
  }
  if (!leaf_->requiresGrad) return {};
  if (!meta.grad.defined()) {
    // Steal the buffer when nothing else can see it (the engine's own sum); else copy, so a
    // later in-place change of .grad cannot reach another tensor.
    bool unique = g.impl()->refCount() == 1 && g.storage()->refCount() == 1 && g.isContiguous() &&
                  !g.impl()->autogradMeta;
    if (GradMode::isEnabled()) meta.grad = unique ? g : ops::clone(g);
    else meta.grad = unique ? g : ops::clone(ops::detach(g));
  } else if (GradMode::isEnabled()) {
    meta.grad = ops::add(meta.grad, g); // create_graph: keep the sum differentiable
  } else {
    ops::add_(meta.grad, g);
  }
  return {};
}

} // namespace kiln::autograd
