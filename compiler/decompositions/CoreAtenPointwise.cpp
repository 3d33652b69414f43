// Non-core pointwise ops in core ATen ops, following torch/_decomp/decompositions.py and
// torch/_refs (round.decimals, square, nan_to_num, silu, isfinite, lerp, addcmul, addcdiv,
// isclose, exp2; erfinv after ATen's kernel). A Scalar operand in first position becomes a 0-d tensor of the dtype it
// would promote to.
#include "compiler/decompositions/CoreAtenSupport.h"
#include "runtime/DefaultDtype.h"
#include "generated/DecompositionDecls.h"

#include <cstdint>
#include <cmath>
#include <limits>

namespace kiln::decompositions {

namespace {

constexpr double kInf = std::numeric_limits<double>::infinity();

// A Scalar first operand as a 0-d tensor that promotes with `other` as the Python number
// would: it keeps other's dtype unless its kind is higher (float over integer over bool), then
// the default dtype of its kind. (A graph cannot hold a number as an op's first tensor.)
Tensor number(const Scalar& s, const Tensor& other) {
  ScalarType t = other.dtype();
  if (s.isBool()) return ops::scalar_tensor(s, t, other.device());
  if (s.isIntegral() && t == ScalarType::Bool) t = ScalarType::Int64;
  if (!s.isIntegral() && !isFloatingType(t)) t = defaultFloatType();
  return ops::scalar_tensor(s, t, other.device());
}

// The largest finite value of a floating dtype (torch.finfo(dtype).max).
double finiteMax(ScalarType t) {
  switch (t) {
  case ScalarType::Float16:
    return 65504.0;
  case ScalarType::BFloat16:
    return 3.3895313892515355e38;
  case ScalarType::Float32:
    return double(std::numeric_limits<float>::max());
  default:
    return std::numeric_limits<double>::max();
  }
}

} // namespace

Tensor addScalarTensor(const Scalar& self, const Tensor& other, const Scalar& alpha) {
  return ops::add(number(self, other), other, alpha);
}

Tensor subScalarTensor(const Scalar& self, const Tensor& other, const Scalar& alpha) {
  return ops::sub(number(self, other), other, alpha);
}

Tensor mulScalarTensor(const Scalar& self, const Tensor& other) { return ops::mul(number(self, other), other); }

Tensor divScalarTensor(const Scalar& self, const Tensor& other,
                       const std::optional<std::string>& roundingMode) {
  return roundingMode ? ops::div(number(self, other), other, roundingMode) : ops::div(number(self, other), other);
}

Tensor rsubTensor(const Tensor& self, const Tensor& other, const Scalar& alpha) {
  return ops::sub(other, self, alpha);
}

Tensor rsubScalar(const Tensor& self, const Scalar& other, const Scalar& alpha) {
  return ops::sub(number(other, self), self, alpha);
}

Tensor negative(const Tensor& self) { return ops::neg(self); }

// positive returns its input (a bool input is rejected by the op itself).
Tensor positive(const Tensor& self) { return self; }

Tensor roundDecimals(const Tensor& self, int64_t decimals) {
  double scale = std::pow(10.0, double(decimals));
  return ops::div(ops::round(ops::mul(self, Scalar(scale))), Scalar(scale));
}

// mul(x, x), bool promoted to int64 (torch._refs.square).
Tensor square(const Tensor& self) {
  Tensor x = self.dtype() == ScalarType::Bool ? convert(self, ScalarType::Int64) : self;
  return ops::mul(x, x);
}

Tensor nanToNum(const Tensor& self, std::optional<double> nan, std::optional<double> posinf,
                std::optional<double> neginf) {
  if (!isFloatingType(self.dtype())) return ops::clone(self);
  double big = finiteMax(self.dtype());
  Tensor result = ops::masked_fill(self, ops::isnan(self), Scalar(nan.value_or(0.0)));
  Tensor inf = ops::isinf(self);
  result = ops::masked_fill(result, ops::logical_and(inf, ops::lt(self, Scalar(0.0))),
                            Scalar(neginf.value_or(-big)));
  return ops::masked_fill(result, ops::logical_and(inf, ops::gt(self, Scalar(0.0))),
                          Scalar(posinf.value_or(big)));
}

Tensor silu(const Tensor& self) { return ops::mul(self, ops::sigmoid(self)); }

Tensor isfinite(const Tensor& self) {
  if (!isFloatingType(self.dtype())) return ops::full_like(self, Scalar(true), ScalarType::Bool);
  return ops::logical_not(ops::logical_or(ops::isnan(self), ops::isinf(self)));
}

Tensor trueDivideTensor(const Tensor& self, const Tensor& other) { return ops::div(self, other); }

Tensor trueDivideScalar(const Tensor& self, const Scalar& other) { return ops::div(self, other); }

Tensor trueDivideScalarTensor(const Scalar& self, const Tensor& other) {
  return ops::div(number(self, other), other);
}

Tensor floorDivideTensor(const Tensor& self, const Tensor& other) {
  return ops::div(self, other, std::string("floor"));
}

Tensor floorDivideScalar(const Tensor& self, const Scalar& other) {
  return ops::div(self, other, std::string("floor"));
}

Tensor floorDivideScalarTensor(const Scalar& self, const Tensor& other) {
  return ops::div(number(self, other), other, std::string("floor"));
}

Tensor remainderScalarTensor(const Scalar& self, const Tensor& other) {
  return ops::remainder(number(self, other), other);
}

Tensor bitwiseAndScalarTensor(const Scalar& self, const Tensor& other) {
  return ops::bitwise_and(number(self, other), other);
}

Tensor bitwiseOrScalarTensor(const Scalar& self, const Tensor& other) {
  return ops::bitwise_or(number(self, other), other);
}

Tensor bitwiseXorScalarTensor(const Scalar& self, const Tensor& other) {
  return ops::bitwise_xor(number(self, other), other);
}

Tensor clip(const Tensor& self, const std::optional<Scalar>& min, const std::optional<Scalar>& max) {
  return ops::clamp(self, min, max);
}

Tensor clipTensor(const Tensor& self, const std::optional<Tensor>& min,
                  const std::optional<Tensor>& max) {
  return ops::clampTensor(self, min, max);
}

Tensor clampMin(const Tensor& self, const Scalar& min) { return ops::clamp(self, min, std::nullopt); }

Tensor clampMinTensor(const Tensor& self, const Tensor& min) {
  return ops::clampTensor(self, min, std::nullopt);
}

Tensor clampMax(const Tensor& self, const Scalar& max) { return ops::clamp(self, std::nullopt, max); }

Tensor clampMaxTensor(const Tensor& self, const Tensor& max) {
  return ops::clampTensor(self, std::nullopt, max);
}

// start + w * (end - start) for |w| < 0.5, end - (1 - w) * (end - start) otherwise: exact at
// both ends (torch's lerp decomposition).
Tensor lerpScalar(const Tensor& self, const Tensor& end, const Scalar& weight) {
  Tensor diff = ops::sub(end, self);
  double w = weight.toDouble();
  if (std::abs(w) < 0.5) return ops::add(self, ops::mul(diff, weight));
  return ops::add(end, ops::mul(diff, Scalar(w - 1)));
}

Tensor lerpTensor(const Tensor& self, const Tensor& end, const Tensor& weight) {
  Tensor diff = ops::sub(end, self);
  Tensor high = ops::ge(ops::abs(weight), Scalar(0.5));
  Tensor coeff = ops::where(high, ops::sub(weight, Scalar(int64_t(1))), weight);
  return ops::add(ops::mul(coeff, diff), ops::where(high, end, self));
}

// torch._refs.addcmul/addcdiv: self + value * tensor1 * tensor2 (or / tensor2). value is cast
// to the tensors' promoted kind first so that, as in eager, it takes no part in promotion.
Scalar addcValue(const Tensor& self, const Tensor& tensor1, const Tensor& tensor2,
                 const Scalar& value) {
  ScalarType t = promoteTypes(promoteTypes(self.dtype(), tensor1.dtype()), tensor2.dtype());
  if (isFloatingType(t) || value.isBool()) return value;
  return Scalar(int64_t(value.toDouble()));
}

Tensor addcmul(const Tensor& self, const Tensor& tensor1, const Tensor& tensor2,
               const Scalar& value) {
  Scalar v = addcValue(self, tensor1, tensor2, value);
  return ops::add(self, ops::mul(ops::mul(tensor1, v), tensor2));
}

Tensor addcdiv(const Tensor& self, const Tensor& tensor1, const Tensor& tensor2,
               const Scalar& value) {
  return ops::add(self, ops::div(ops::mul(tensor1, value), tensor2));
}

// torch._refs.isclose: equal, or (for nan with equal_nan) both nan, or a finite difference
// within atol + |rtol * other| (integers compared in the default float dtype).
Tensor isclose(const Tensor& self, const Tensor& other, double rtol, double atol, bool equalNan) {
  Tensor close = ops::eq(self, other);
  if (equalNan && isFloatingType(self.dtype()))
    close = ops::logical_or(close, ops::logical_and(ops::isnan(self), ops::isnan(other)));
  if (rtol == 0 && atol == 0) return close;
  Tensor a = self, b = other;
  if (!isFloatingType(a.dtype())) {
    a = convert(a, defaultFloatType());
    b = convert(b, defaultFloatType());
  }
  Tensor allowed = ops::add(ops::abs(ops::mul(b, Scalar(rtol))), Scalar(atol));
  Tensor actual = ops::abs(ops::sub(a, b));
  return ops::logical_or(close, ops::logical_and(ops::ne(actual, Scalar(kInf)),
                                                 ops::le(actual, allowed)));
}

// 2 ** x, integers and bool computed in the default float dtype.
Tensor exp2(const Tensor& self) {
  Tensor x = isFloatingType(self.dtype()) ? self : convert(self, defaultFloatType());
  return ops::pow(Scalar(2.0), x);
}

// erf's inverse as the eager kernel computes it (runtime/cpu/UnaryKernels.cpp, after ATen's
// calc_erfinv), in float32 for 16-bit floats and integers: a rational guess per range, two
// Newton steps on erf, then the edges (+-inf at +-1, NaN beyond). Both guesses are computed and
// one selected; the other's NaNs are discarded.
Tensor erfinv(const Tensor& self) {
  ScalarType result = isFloatingType(self.dtype()) ? self.dtype() : defaultFloatType();
  Tensor y = convert(self, computationDtype(result));
  // c[0] z^(n-1) + ... + c[n-1], in Horner's order as the kernel writes it.
  auto horner = [](const Tensor& z, std::initializer_list<double> coefficients) {
    auto c = coefficients.begin();
    Tensor acc = ops::add(ops::mul(z, Scalar(*c)), Scalar(*(c + 1)));
    for (c += 2; c != coefficients.end(); ++c)
      acc = ops::add(ops::mul(acc, z), Scalar(*c));
    return acc;
  };
  Tensor yAbs = ops::abs(y), negative = ops::lt(y, Scalar(0.0));
  Tensor z = ops::mul(y, y);
  Tensor num = horner(z, {-0.140543331, 0.914624893, -1.645349621, 0.886226899});
  Tensor dem = horner(z, {0.012229801, -0.329097515, 1.442710462, -2.118377725, 1.0});
  Tensor central = ops::div(ops::mul(y, num), dem);
  Tensor oneMinus = ops::add(ops::neg(yAbs), Scalar(1.0));
  Tensor t = ops::sqrt(ops::neg(ops::log(ops::div(oneMinus, Scalar(2.0)))));
  Tensor tailNum = horner(t, {1.641345311, 3.429567803, -1.624906493, -1.970840454});
  Tensor tailDem = horner(t, {1.637067800, 3.543889200, 1.0});
  Tensor tail = ops::div(ops::where(negative, ops::neg(tailNum), tailNum), tailDem);
  Tensor x = ops::where(ops::le(yAbs, Scalar(0.7)), central, tail);
  for (int step = 0; step < 2; ++step) {
    Tensor slope = ops::mul(ops::exp(ops::mul(ops::neg(x), x)), Scalar(1.12837916709551257390));
    x = ops::sub(x, ops::div(ops::sub(ops::erf(x), y), slope));
  }
  Tensor inf = ops::where(negative, ops::full_like(y, Scalar(-kInf)), ops::full_like(y, Scalar(kInf)));
  x = ops::where(ops::eq(yAbs, Scalar(1.0)), inf, x);
  x = ops::where(ops::gt(yAbs, Scalar(1.0)),
                 ops::full_like(y, Scalar(std::numeric_limits<double>::quiet_NaN())), x);
  return convert(x, result);
}

// In-place ops whose functional twin has another overload name: the twin, copied into self.
Tensor floorDivideInplace(const Tensor& self, const Tensor& other) {
  return ops::copy_(self, ops::floor_divide(self, other), false);
}

Tensor powInplace(const Tensor& self, const Tensor& exponent) {
  return ops::copy_(self, ops::pow(self, exponent), false);
}

} // namespace kiln::decompositions
