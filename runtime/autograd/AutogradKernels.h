// The Autograd dispatch key: what the generated kernels share, the in-place and copy_ kernels,
// and the fallback for ops without a formula.
#pragma once
#include "generated/OpId.h"
#include "runtime/Value.h"
#include "runtime/autograd/AutogradMeta.h"

namespace kiln {
class Dispatcher;
}

namespace kiln::autograd {

bool anyRequiresGrad(const Value& v);
// Runs op with the keys below Autograd (the computation itself, or a mode below it).
void redispatchBelowAutograd(OpId op, Stack& s);
// Marks every tensor output of a view op as a view of `input`.
void markViews(const Stack& s, const Tensor& input);
// Gives each floating-point tensor output `node` as its grad_fn (output numbers in order).
// `differentiable` (one flag per output, empty: all) leaves the others without a history.
void recordOutputs(const Stack& s, const IntrusivePtr<Node>& node, std::vector<bool> differentiable = {});

bool anyDefined(const std::vector<Tensor>& grads);
// Undefined gradients of a multi-output node become zeros of the output's shape.
void materializeGrads(std::vector<Tensor>& grads, const std::vector<InputMetadata>& meta);
bool anyNeeded(const Node& node, size_t first, size_t count);
[[noreturn]] void throwNoDerivative(const char* op, const char* arg);

// An in-place op under autograd: the functional twin runs (recorded; on a clone of self when its
// formula saves self), its result is copied into self, and self's history is rebased onto it.
void autogradInplace(OpId inplaceOp, OpId functionalOp, bool functionalSavesSelf, Stack& s);
// An in-place view op (t_, transpose_, squeeze_, unsqueeze_) under autograd: the functional view
// runs (recorded), self takes its geometry in place and is rebased onto the view's history.
void autogradInplaceView(OpId inplaceOp, OpId viewOp, Stack& s);

// Registers the generated kernels, copy_ and the fallback.
void registerAutogradKernels(Dispatcher& d);
void registerGeneratedAutogradKernels(Dispatcher& d);

} // namespace kiln::autograd
