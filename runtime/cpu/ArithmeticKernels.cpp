// add, sub, mul, div (true, trunc and floor rounding), floor_divide and rsub: their Scalar and
// number-first overloads and in-place forms.
#include <cmath>

#include "generated/KernelDecls.h"
#include "runtime/cpu/Loops.h"
#include "runtime/cpu/PointwiseOps.h"

namespace kiln::kernels {

namespace {

using cpu::pointwiseResultType;
using cpu::runInplace;

void checkAlpha(ScalarType dtype, const Scalar& alpha) {
  KILN_CHECK(!alpha.isBool() || dtype == ScalarType::Bool,
             "Boolean alpha only supported for Boolean results.");
  KILN_CHECK(isFloatingType(dtype) || !alpha.isFloating(),
             "For integral input tensors, argument alpha must not be a floating point number.");
}

void checkSub(const Tensor& self, const Tensor& other) {
  KILN_CHECK(
      self.dtype() != ScalarType::Bool || other.dtype() != ScalarType::Bool,
      "Subtraction, the `-` operator, with two bool tensors is not supported. Use the `^` or "
      "`logical_xor()` operator instead.");
  KILN_CHECK(
      self.dtype() != ScalarType::Bool && other.dtype() != ScalarType::Bool,
      "Subtraction, the `-` operator, with a bool tensor is not supported. If you are trying "
      "to invert a mask, use the `~` or `logical_not()` operator instead.");
}

// self + sign * alpha * other; sign is -1 for sub.
Tensor addInto(const char* name, const Tensor& self, const Tensor& other, const Scalar& alpha,
               bool subtract, const Tensor& out) {
  if (subtract) checkSub(self, other);
  auto iter = TensorIterator::binary(name, self, other, PromotionKind::Default, out);
  checkAlpha(iter.computeDtype(), alpha);
  if (iter.isMeta()) return iter.output(); // shapes and dtypes only: no dtype dispatch
  KILN_DISPATCH_ALL(iter.computeDtype(), name, [&]<typename T>() {
    using M = opmath_t<T>;
    if constexpr (std::is_same_v<T, bool>) {
      bool a = alpha.toBool();
      cpu::cpuKernel(iter, [a](bool x, bool y) -> bool { return x || (a && y); });
    } else {
      // PyTorch converts alpha to the tensor's type first: a 16-bit float tensor's alpha is
      // rounded to 16 bits (add_(g, alpha=-0.1) on bfloat16 multiplies by -0.10009765625).
      M a = std::is_same_v<M, T> ? alpha.to<M>() : M(T(alpha.to<M>()));
      if (subtract) a = cpu::wrappingNeg(a);
      if (a == M(1)) {
        cpu::cpuKernel(iter, [](T x, T y) -> T { return T(cpu::wrappingAdd(M(x), M(y))); });
      } else if (a == M(-1)) {
        cpu::cpuKernel(iter, [](T x, T y) -> T { return T(cpu::wrappingSub(M(x), M(y))); });
      } else {
        cpu::cpuKernel(iter, [a](T x, T y) -> T {
          return T(cpu::wrappingAdd(M(x), cpu::wrappingMul(a, M(y))));
        });
      }
    }
  });
  return iter.output();
}

Tensor addInplace(const char* name, const Tensor& self, const Tensor& other, const Scalar& alpha,
                  bool subtract) {
  if (subtract) checkSub(self, other);
  return runInplace(
      name, self, pointwiseResultType({self, other}, PromotionKind::Default), {other},
      [&](const Tensor& out) { return addInto(name, self, other, alpha, subtract, out); });
}

Tensor mulInto(const char* name, const Tensor& self, const Tensor& other, const Tensor& out) {
  ScalarType result = pointwiseResultType({self, other}, PromotionKind::Default);
  if (cpu::isReducedFloatScalarCase(self, other, result)) {
    float b = other.item().to<float>();
    auto iter = cpu::unaryAs(name, self, result, out);
    if (iter.isMeta()) return iter.output();
    KILN_DISPATCH_FLOATING(result, name, [&]<typename T>() {
      cpu::cpuKernel(iter, [b](T x) -> T { return T(float(x) * b); });
    });
    return iter.output();
  }
  auto iter = TensorIterator::binary(name, self, other, PromotionKind::Default, out);
  if (iter.isMeta()) return iter.output();
  KILN_DISPATCH_ALL(iter.computeDtype(), name, [&]<typename T>() {
    using M = opmath_t<T>;
    if constexpr (std::is_same_v<T, bool>) {
      cpu::cpuKernel(iter, [](bool x, bool y) -> bool { return x && y; });
    } else {
      cpu::cpuKernel(iter, [](T x, T y) -> T { return T(cpu::wrappingMul(M(x), M(y))); });
    }
  });
  return iter.output();
}

Tensor divInto(const char* name, const Tensor& self, const Tensor& other, const Tensor& out) {
  ScalarType result = pointwiseResultType({self, other}, PromotionKind::IntToFloat);
  if (cpu::isReducedFloatScalarCase(self, other, result)) {
    float b = other.item().to<float>();
    auto iter = cpu::unaryAs(name, self, result, out);
    if (iter.isMeta()) return iter.output();
    KILN_DISPATCH_FLOATING(result, name, [&]<typename T>() {
      cpu::cpuKernel(iter, [b](T x) -> T { return T(float(x) / b); });
    });
    return iter.output();
  }
  auto iter = TensorIterator::binary(name, self, other, PromotionKind::IntToFloat, out);
  if (iter.isMeta()) return iter.output();
  KILN_DISPATCH_FLOATING(iter.computeDtype(), name, [&]<typename T>() {
    using M = opmath_t<T>;
    cpu::cpuKernel(iter, [](T x, T y) -> T { return T(M(x) / M(y)); });
  });
  return iter.output();
}

// Python's floor division for integers: rounds toward negative infinity.
template <typename T> inline T floorDivInteger(T x, T y) {
  T q = cpu::truncDiv(x, y);
  if constexpr (std::is_signed_v<T>) {
    if ((x < 0) != (y < 0) && cpu::truncMod(x, y) != 0) q = T(q - 1);
  }
  return q;
}

// PyTorch's div_floor_floating: fmod-based, exact, and consistent with remainder.
template <typename M> inline M floorDivFloating(M x, M y) {
  if (y == 0) return x / y;
  M mod = std::fmod(x, y);
  M div = (x - mod) / y;
  if (mod != 0 && ((y < 0) != (mod < 0))) div -= 1;
  if (div == 0) return std::copysign(M(0), x / y);
  M floordiv = std::floor(div);
  if (div - floordiv > M(0.5)) floordiv += 1;
  return floordiv;
}

enum class Rounding { Trunc, Floor };

Rounding parseRoundingMode(const std::string& mode) {
  KILN_CHECK(mode == "trunc" || mode == "floor",
                   "div expected rounding_mode to be one of None, 'trunc', or 'floor' but found '",
                   mode, "'");
  return mode == "floor" ? Rounding::Floor : Rounding::Trunc;
}

Tensor divRoundInto(const char* name, const Tensor& self, const Tensor& other, Rounding rounding,
                    const Tensor& out) {
  auto iter = TensorIterator::binary(name, self, other, PromotionKind::Default, out);
  if (iter.isMeta()) return iter.output();
  if (iter.computeDtype() == ScalarType::Bool)
    cpu::throwNotImplemented(rounding == Rounding::Floor ? "div_floor_cpu" : "div_trunc_cpu",
                             ScalarType::Bool);
  cpu::checkNoIntegerZero(iter, 1);
  KILN_DISPATCH_NUMERIC(iter.computeDtype(), name, [&]<typename T>() {
    using M = opmath_t<T>;
    if constexpr (std::is_integral_v<T>) {
      if (rounding == Rounding::Floor)
        cpu::cpuKernel(iter, [](T x, T y) -> T { return floorDivInteger(x, y); });
      else
        cpu::cpuKernel(iter, [](T x, T y) -> T { return cpu::truncDiv(x, y); });
    } else if (rounding == Rounding::Floor) {
      cpu::cpuKernel(iter, [](T x, T y) -> T { return T(floorDivFloating(M(x), M(y))); });
    } else {
      cpu::cpuKernel(iter, [](T x, T y) -> T { return T(std::trunc(M(x) / M(y))); });
    }
  });
  return iter.output();
}

Tensor divModeInto(const char* name, const Tensor& self, const Tensor& other,
                   const std::optional<std::string>& mode, const Tensor& out) {
  if (!mode) return divInto(name, self, other, out);
  return divRoundInto(name, self, other, parseRoundingMode(*mode), out);
}

Tensor divModeInplace(const char* name, const Tensor& self, const Tensor& other,
                      const std::optional<std::string>& mode) {
  if (mode) parseRoundingMode(*mode);
  ScalarType result =
      pointwiseResultType({self, other}, mode ? PromotionKind::Default : PromotionKind::IntToFloat);
  return runInplace(name, self, result, {other},
                    [&](const Tensor& out) { return divModeInto(name, self, other, mode, out); });
}

} // namespace

Tensor add(const Tensor& self, const Tensor& other, const Scalar& alpha) {
  return addInto("add", self, other, alpha, false, {});
}
Tensor addScalar(const Tensor& self, const Scalar& other, const Scalar& alpha) {
  return add(self, Tensor::wrapScalar(other), alpha);
}
Tensor addScalarTensor(const Scalar& self, const Tensor& other, const Scalar& alpha) {
  return add(Tensor::wrapScalar(self), other, alpha);
}
Tensor add_(const Tensor& self, const Tensor& other, const Scalar& alpha) {
  return addInplace("add_", self, other, alpha, false);
}
Tensor addScalar_(const Tensor& self, const Scalar& other, const Scalar& alpha) {
  return add_(self, Tensor::wrapScalar(other), alpha);
}

Tensor sub(const Tensor& self, const Tensor& other, const Scalar& alpha) {
  return addInto("sub", self, other, alpha, true, {});
}
Tensor subScalar(const Tensor& self, const Scalar& other, const Scalar& alpha) {
  return sub(self, Tensor::wrapScalar(other), alpha);
}
Tensor subScalarTensor(const Scalar& self, const Tensor& other, const Scalar& alpha) {
  return sub(Tensor::wrapScalar(self), other, alpha);
}
Tensor sub_(const Tensor& self, const Tensor& other, const Scalar& alpha) {
  return addInplace("sub_", self, other, alpha, true);
}
Tensor subScalar_(const Tensor& self, const Scalar& other, const Scalar& alpha) {
  return sub_(self, Tensor::wrapScalar(other), alpha);
}
Tensor rsub(const Tensor& self, const Tensor& other, const Scalar& alpha) {
  return addInto("rsub", other, self, alpha, true, {});
}
Tensor rsubScalar(const Tensor& self, const Scalar& other, const Scalar& alpha) {
  return rsub(self, Tensor::wrapScalar(other), alpha);
}

Tensor mul(const Tensor& self, const Tensor& other) { return mulInto("mul", self, other, {}); }
Tensor mulScalar(const Tensor& self, const Scalar& other) {
  return mul(self, Tensor::wrapScalar(other));
}
Tensor mulScalarTensor(const Scalar& self, const Tensor& other) {
  return mul(Tensor::wrapScalar(self), other);
}
Tensor mul_(const Tensor& self, const Tensor& other) {
  return runInplace("mul_", self, pointwiseResultType({self, other}, PromotionKind::Default),
                    {other}, [&](const Tensor& out) { return mulInto("mul_", self, other, out); });
}
Tensor mulScalar_(const Tensor& self, const Scalar& other) {
  return mul_(self, Tensor::wrapScalar(other));
}

Tensor div(const Tensor& self, const Tensor& other) { return divInto("div", self, other, {}); }
Tensor divScalar(const Tensor& self, const Scalar& other) {
  return div(self, Tensor::wrapScalar(other));
}
Tensor divMode(const Tensor& self, const Tensor& other, const std::optional<std::string>& mode) {
  return divModeInto("div", self, other, mode, {});
}
Tensor divScalarMode(const Tensor& self, const Scalar& other,
                     const std::optional<std::string>& mode) {
  return divMode(self, Tensor::wrapScalar(other), mode);
}
Tensor divScalarTensor(const Scalar& self, const Tensor& other,
                       const std::optional<std::string>& mode) {
  return divMode(Tensor::wrapScalar(self), other, mode);
}
Tensor trueDivideScalarTensor(const Scalar& self, const Tensor& other) {
  return div(Tensor::wrapScalar(self), other);
}
Tensor div_(const Tensor& self, const Tensor& other) {
  return divModeInplace("div_", self, other, std::nullopt);
}
Tensor divScalar_(const Tensor& self, const Scalar& other) {
  return div_(self, Tensor::wrapScalar(other));
}
Tensor divMode_(const Tensor& self, const Tensor& other, const std::optional<std::string>& mode) {
  return divModeInplace("div_", self, other, mode);
}
Tensor divScalarMode_(const Tensor& self, const Scalar& other,
                      const std::optional<std::string>& mode) {
  return divMode_(self, Tensor::wrapScalar(other), mode);
}

Tensor floorDivide(const Tensor& self, const Tensor& other) {
  return divRoundInto("floor_divide", self, other, Rounding::Floor, {});
}
Tensor floorDivideScalar(const Tensor& self, const Scalar& other) {
  return floorDivide(self, Tensor::wrapScalar(other));
}
Tensor floorDivideScalarTensor(const Scalar& self, const Tensor& other) {
  return floorDivide(Tensor::wrapScalar(self), other);
}
Tensor floorDivide_(const Tensor& self, const Tensor& other) {
  return divModeInplace("floor_divide_", self, other, std::string("floor"));
}
Tensor floorDivideScalar_(const Tensor& self, const Scalar& other) {
  return floorDivide_(self, Tensor::wrapScalar(other));
}

} // namespace kiln::kernels
