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
    // The negative branch reads x with its positive part replaced by 0: exp of a large x overflowed
    // and its unused gradient (inf * 0) made the gradient nan. (where, not clamp: where keeps only
    // the mask for backward, so elu_'s write into x leaves nothing saved stale.)
    Tensor nonPositive = ops::where(ops::gt(x, 0), ops::zeros_like(x), x);
    Tensor negative = ops::mul(ops::expm1(ops::mul(nonPositive, input_scale)), alpha.toDouble() * scale.toDouble());
    Tensor positive = scale.toDouble() == 1.0 ? x : ops::mul(x, scale);
    return ops::where(ops::gt(x, 0), positive, negative);
  });
}

Tensor softplus(const Tensor& self, const Scalar& beta, const Scalar& threshold) {
  checkFloating(self, "softplus_cpu");
  // log(1 + exp(beta * x)) / beta, or x where beta * x exceeds threshold (PyTorch's formula).
  return inOpMath(self, [&](const Tensor& x) {
    // The soft branch reads beta * x clamped to the threshold: past it exp overflowed to inf and
    // its (unused) gradient inf / inf made the whole gradient nan.
    Tensor scaled = ops::mul(x, beta);
    Tensor soft = ops::div(ops::log1p(ops::exp(ops::clamp_max(scaled, threshold))), beta);
    return ops::where(ops::gt(scaled, threshold), x, soft);
  });
}

Tensor hardtanh(const Tensor& self, const Scalar& min_val, const Scalar& max_val) {
  KILN_CHECK(self.dtype() != ScalarType::Bool, "Bool inputs not supported for hardtanh");
  KILN_CHECK(self.dtype() != ScalarType::UInt8 || (min_val.toDouble() >= 0 && max_val.toDouble() >= 0),
             "cannot do hardtanh on an unsigned type with negative limits");
  // The bounds take the input's type: an integer input stays integer (clamp would promote).
  if (isIntegralType(self.dtype(), false)) return ops::clamp(self, Scalar(min_val.toInt()), Scalar(max_val.toInt()));
  // The limits as constants, not clamp: PyTorch's hardtanh gradient is zero at the limits
  // themselves (clamp's passes there). nan stays nan, as clamp's.
  Tensor low = ops::full_like(self, min_val), high = ops::full_like(self, max_val);
  return ops::where(ops::le(self, min_val), low, ops::where(ops::ge(self, max_val), high, self));
}

Tensor relu6(const Tensor& self) { return hardtanh(self, 0, 6); }

Tensor mish(const Tensor& self) {
  checkFloating(self, "mish_cpu");
  // PyTorch's kernel: x * tanh(log1p(exp(x))), no softplus threshold.
  // softplus past 20 is x (to float precision; tanh is 1 there): exp of a large x overflowed and
  // its gradient inf / inf was nan.
  return inOpMath(self, [](const Tensor& x) {
    Tensor capped = ops::where(ops::gt(x, 20), ops::full_like(x, 20), x);
    Tensor soft = ops::where(ops::gt(x, 20), x, ops::log1p(ops::exp(capped)));
    return ops::mul(x, ops::tanh(soft));
  });
}

Tensor hardswish(const Tensor& self) {
  checkFloating(self, "hardswish_cpu");
  // Piecewise as PyTorch's gradient: 0 up to -3 (included), x / 3 + 1/2 inside, 1 from 3 on (the
  // clamp form's subgradients gave -1/2 and 3/2 at the knots).
  return inOpMath(self, [](const Tensor& x) {
    Tensor inside = ops::div(ops::mul(x, ops::add(x, 3)), 6);
    return ops::where(ops::le(x, -3), ops::zeros_like(x), ops::where(ops::ge(x, 3), x, inside));
  });
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
