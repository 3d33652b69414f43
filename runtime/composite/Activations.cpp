// Activations and dropout written in other ops (ir/ops/activation.yaml): autograd and tracing
// see the ops they are made of.
#include "generated/KernelDecls.h"
#include "generated/Ops.h"
#include "runtime/Error.h"

namespace kiln::kernels {

namespace {

// PyTorch dispatches these over floating types only; its error names the CPU kernel.
void checkFloating(const Tensor& self, const char* kernelName) {
  if (!isFloatingType(self.dtype())) throwUnsupportedDtype(kernelName, self.dtype());
}

// log(1 + exp(beta * x)) / beta, or x where beta * x exceeds threshold (PyTorch's formula).
Tensor softplusOf(const Tensor& self, const Scalar& beta, const Scalar& threshold) {
  Tensor scaled = ops::mul(self, beta);
  Tensor soft = ops::div(ops::log1p(ops::exp(scaled)), beta);
  return ops::where(ops::gt(scaled, threshold), self, soft);
}

} // namespace

Tensor leakyRelu(const Tensor& self, const Scalar& negative_slope) {
  checkFloating(self, "leaky_relu_cpu");
  return ops::where(ops::gt(self, 0), self, ops::mul(self, negative_slope));
}

Tensor elu(const Tensor& self, const Scalar& alpha, const Scalar& scale, const Scalar& input_scale) {
  checkFloating(self, "elu_cpu");
  Tensor negative = ops::mul(ops::expm1(ops::mul(self, input_scale)), alpha.toDouble() * scale.toDouble());
  Tensor positive = scale.toDouble() == 1.0 ? self : ops::mul(self, scale);
  return ops::where(ops::gt(self, 0), positive, negative);
}

Tensor softplus(const Tensor& self, const Scalar& beta, const Scalar& threshold) {
  checkFloating(self, "softplus_cpu");
  return softplusOf(self, beta, threshold);
}

Tensor hardtanh(const Tensor& self, const Scalar& min_val, const Scalar& max_val) {
  return ops::clamp(self, min_val, max_val);
}

Tensor relu6(const Tensor& self) { return ops::clamp(self, 0, 6); }

Tensor mish(const Tensor& self) {
  checkFloating(self, "mish_cpu");
  return ops::mul(self, ops::tanh(softplusOf(self, 1, 20)));
}

Tensor hardswish(const Tensor& self) {
  checkFloating(self, "hardswish_cpu");
  return ops::div(ops::mul(self, ops::clamp(ops::add(self, 3), 0, 6)), 6);
}

Tensor dropout(const Tensor& input, double p, bool train) {
  KILN_CHECK_VALUE(p >= 0.0 && p <= 1.0, "dropout probability has to be between 0 and 1, but got ", p);
  if (!train || p == 0.0) return input;
  if (p == 1.0) return ops::mul(input, ops::zeros_like(input));
  checkFloating(input, "dropout");
  // Kept elements are scaled by 1/(1-p) so the expectation is unchanged.
  Tensor keep = ops::ge(ops::rand_like(input), p);
  return ops::mul(input, ops::div(ops::to(keep, input.dtype()), 1.0 - p));
}

} // namespace kiln::kernels
