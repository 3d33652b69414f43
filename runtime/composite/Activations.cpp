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

// 16-bit inputs are computed in float32 and rounded once, as PyTorch's kernels do.
template <typename Fn> Tensor inOpMath(const Tensor& self, Fn&& fn) {
  if (self.dtype() != ScalarType::Float16 && self.dtype() != ScalarType::BFloat16) return fn(self);
  return ops::to(fn(ops::to(self, ScalarType::Float32)), self.dtype());
}

} // namespace

Tensor leakyRelu(const Tensor& self, const Scalar& negative_slope) {
  checkFloating(self, "leaky_relu_cpu");
  return ops::where(ops::gt(self, 0), self, ops::mul(self, negative_slope));
}

Tensor elu(const Tensor& self, const Scalar& alpha, const Scalar& scale, const Scalar& input_scale) {
  checkFloating(self, "elu_cpu");
  return inOpMath(self, [&](const Tensor& x) {
    Tensor negative = ops::mul(ops::expm1(ops::mul(x, input_scale)), alpha.toDouble() * scale.toDouble());
    Tensor positive = scale.toDouble() == 1.0 ? x : ops::mul(x, scale);
    return ops::where(ops::gt(x, 0), positive, negative);
  });
}

Tensor softplus(const Tensor& self, const Scalar& beta, const Scalar& threshold) {
  checkFloating(self, "softplus_cpu");
  // log(1 + exp(beta * x)) / beta, or x where beta * x exceeds threshold (PyTorch's formula).
  return inOpMath(self, [&](const Tensor& x) {
    Tensor scaled = ops::mul(x, beta);
    Tensor soft = ops::div(ops::log1p(ops::exp(scaled)), beta);
    return ops::where(ops::gt(scaled, threshold), x, soft);
  });
}

Tensor hardtanh(const Tensor& self, const Scalar& min_val, const Scalar& max_val) {
  KILN_CHECK(self.dtype() != ScalarType::Bool, "Bool inputs not supported for hardtanh");
  KILN_CHECK(self.dtype() != ScalarType::UInt8 || (min_val.toDouble() >= 0 && max_val.toDouble() >= 0),
             "cannot do hardtanh on an unsigned type with negative limits");
  // The bounds take the input's type: an integer input stays integer (clamp would promote).
  if (isIntegralType(self.dtype(), false)) return ops::clamp(self, Scalar(min_val.toInt()), Scalar(max_val.toInt()));
  return ops::clamp(self, min_val, max_val);
}

Tensor relu6(const Tensor& self) { return hardtanh(self, 0, 6); }

Tensor mish(const Tensor& self) {
  checkFloating(self, "mish_cpu");
  // PyTorch's kernel: x * tanh(log1p(exp(x))), no softplus threshold.
  return inOpMath(self, [](const Tensor& x) { return ops::mul(x, ops::tanh(ops::log1p(ops::exp(x)))); });
}

Tensor hardswish(const Tensor& self) {
  checkFloating(self, "hardswish_cpu");
  return inOpMath(self, [](const Tensor& x) { return ops::div(ops::mul(x, ops::clamp(ops::add(x, 3), 0, 6)), 6); });
}

Tensor dropout(const Tensor& input, double p, bool train) {
  KILN_CHECK_VALUE(p >= 0.0 && p <= 1.0, "dropout probability has to be between 0 and 1, but got ", p);
  if (!train || p == 0.0 || input.numel() == 0) return input;
  if (p == 1.0) return ops::mul(input, ops::zeros_like(input));
  KILN_CHECK(isFloatingType(input.dtype()), "result type Float can't be cast to the desired output type ",
             scalarTypeShortName(input.dtype()));
  // PyTorch's CPU dropout: a mask of bernoulli_(1 - p) (a double uniform below 1 - p per
  // element, drawn here as rand_like in float64 so that compiled graphs draw the same values),
  // divided by 1 - p so the expectation is unchanged, times the input.
  Tensor keep = ops::lt(ops::rand_like(input, ScalarType::Float64), 1.0 - p);
  return ops::mul(input, ops::div(ops::to(keep, input.dtype()), 1.0 - p));
}

} // namespace kiln::kernels
