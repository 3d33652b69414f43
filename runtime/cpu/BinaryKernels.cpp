// Binary pointwise kernels besides the four arithmetic ones: remainder, fmod, pow, maximum,
// minimum, atan2, logical and/or/xor, bitwise and/or/xor and shifts, with their Scalar and
// number-first overloads and in-place forms.
#include <climits>
#include <cmath>

#include "generated/KernelDecls.h"
#include "runtime/cpu/KilnMath.h"
#include "runtime/cpu/Loops.h"
#include "runtime/cpu/PointwiseOps.h"

namespace kiln::kernels {

namespace {

using cpu::binaryInplace;
using cpu::binaryInto;
using cpu::pointwiseResultType;
using cpu::runInplace;

// remainder: the result takes the divisor's sign (Python's %).
void remainderLoop(const TensorIterator& iter) {
  if (iter.computeDtype() == ScalarType::Bool)
    cpu::throwNotImplemented("remainder_cpu", ScalarType::Bool);
  cpu::checkNoIntegerZero(iter, 1);
  KILN_DISPATCH_NUMERIC(iter.computeDtype(), "remainder", [&]<typename T>() {
    using M = opmath_t<T>;
    if constexpr (std::is_integral_v<T>) {
      cpu::cpuKernel(iter, [](T a, T b) -> T {
        T r = cpu::truncMod(a, b);
        if constexpr (std::is_signed_v<T>) {
          if (r != 0 && ((r < 0) != (b < 0))) r = T(r + b);
        }
        return r;
      });
    } else {
      cpu::cpuKernel(iter, [](T a, T b) -> T {
        M x = M(a), y = M(b);
        M mod = std::fmod(x, y);
        if (mod != 0 && ((y < 0) != (mod < 0))) mod += y;
        return T(mod);
      });
    }
  });
}

// fmod: the result takes the dividend's sign (C's fmod).
void fmodLoop(const TensorIterator& iter) {
  if (iter.computeDtype() == ScalarType::Bool)
    cpu::throwNotImplemented("fmod_cpu", ScalarType::Bool);
  cpu::checkNoIntegerZero(iter, 1);
  KILN_DISPATCH_NUMERIC(iter.computeDtype(), "fmod", [&]<typename T>() {
    using M = opmath_t<T>;
    if constexpr (std::is_integral_v<T>)
      cpu::cpuKernel(iter, [](T a, T b) -> T { return cpu::truncMod(a, b); });
    else
      cpu::cpuKernel(iter, [](T a, T b) -> T { return T(std::fmod(M(a), M(b))); });
  });
}

// c10's powi: exponentiation by squaring; negative exponents give 0 except for bases 1 and -1.
template <typename T> T powInteger(T base, T exp) {
  if constexpr (std::is_signed_v<T>) {
    if (exp < 0) {
      if (base == 1) return T(1);
      if (base == -1) return exp % 2 != 0 ? T(-1) : T(1);
      return T(0);
    }
  }
  T result = 1;
  while (exp) {
    if (exp & 1) result = cpu::wrappingMul(result, base);
    exp = T(exp / 2);
    base = cpu::wrappingMul(base, base);
  }
  return result;
}

void powLoop(const TensorIterator& iter) {
  if (iter.computeDtype() == ScalarType::Bool) cpu::throwNotImplemented("pow", ScalarType::Bool);
  KILN_DISPATCH_NUMERIC(iter.computeDtype(), "pow", [&]<typename T>() {
    using M = opmath_t<T>;
    if constexpr (std::is_integral_v<T>)
      cpu::cpuKernel(iter, [](T a, T b) -> T { return powInteger(a, b); });
    else
      cpu::cpuKernel(iter, [](T a, T b) -> T { return T(std::pow(M(a), M(b))); });
  });
}

// PyTorch's pow(tensor, number): 0 and 1 are a fill and a copy; float, double and bfloat16 use
// sqrt/rsqrt/reciprocal for +-0.5 and -1 and multiplications for 2, 3, -2 (rounding to the
// dtype after each multiplication); other exponents are converted to the dtype with c10's
// overflow check (float and double compute std::pow in double).
Tensor powScalarInto(const char* name, const Tensor& self, const Scalar& exp, const Tensor& out) {
  KILN_CHECK(!(isIntegralType(self.dtype(), true) && !exp.isFloating() && exp.toInt() < 0),
             "Integers to negative integer powers are not allowed.");
  ScalarType result = pointwiseResultType({self, Tensor::wrapScalar(exp)}, PromotionKind::Default);
  auto iter = cpu::unaryAs(name, self, result, out);
  if (iter.isMeta()) return iter.output();
  double e = exp.toDouble();
  if (e == 0.0) {
    KILN_DISPATCH_ALL(result, name,
                      [&]<typename T>() { cpu::cpuKernel(iter, [](T) -> T { return T(1); }); });
    return iter.output();
  }
  if (e == 1.0) {
    KILN_DISPATCH_ALL(result, name,
                      [&]<typename T>() { cpu::cpuKernel(iter, [](T x) -> T { return x; }); });
    return iter.output();
  }
  KILN_DISPATCH_NUMERIC(result, name, [&]<typename T>() {
    using M = opmath_t<T>;
    if constexpr (std::is_integral_v<T>) {
      T ex = cpu::checkedScalarTo<T>(exp);
      cpu::cpuKernel(iter, [ex](T x) -> T { return powInteger(x, ex); });
    } else if constexpr (std::is_same_v<T, Half>) {
      M ex = M(cpu::checkedScalarTo<T>(exp));
      cpu::cpuKernel(iter, [ex](T x) -> T { return T(std::pow(M(x), ex)); });
    } else {
      if (e == 0.5)
        cpu::cpuKernel(iter, [](T x) -> T { return T(std::sqrt(M(x))); });
      else if (e == -0.5)
        cpu::cpuKernel(iter, [](T x) -> T { return T(M(1) / std::sqrt(M(x))); });
      else if (e == -1.0)
        cpu::cpuKernel(iter, [](T x) -> T { return T(M(1) / M(x)); });
      else if (e == 2.0)
        cpu::cpuKernel(iter, [](T x) -> T { return T(M(x) * M(x)); });
      else if (e == 3.0)
        cpu::cpuKernel(iter, [](T x) -> T { return T(M(T(M(x) * M(x))) * M(x)); });
      else if (e == -2.0)
        cpu::cpuKernel(iter, [](T x) -> T { return T(M(1) / M(T(M(x) * M(x)))); });
      else if constexpr (std::is_same_v<T, BFloat16>) {
        M ex = M(cpu::checkedScalarTo<T>(exp));
        cpu::cpuKernel(iter, [ex](T x) -> T { return T(std::pow(M(x), ex)); });
      } else {
        cpu::cpuKernel(iter, [e](T x) -> T { return T(std::pow(double(x), e)); });
      }
    }
  });
  return iter.output();
}

// pow(tensor, tensor); a Python-number exponent behaves as pow(tensor, number).
Tensor powInto(const char* name, const Tensor& self, const Tensor& exponent, const Tensor& out) {
  if (exponent.isWrappedNumber() && !exponent.isMeta())
    return powScalarInto(name, self, exponent.item(), out);
  return binaryInto(name, self, exponent, PromotionKind::Default, out, powLoop);
}

void maximumLoop(const TensorIterator& iter) {
  KILN_DISPATCH_ALL(iter.computeDtype(), "maximum", [&]<typename T>() {
    using M = opmath_t<T>;
    if constexpr (std::is_same_v<T, bool>) {
      cpu::cpuKernel(iter, [](bool a, bool b) -> bool { return a || b; });
    } else if constexpr (std::is_integral_v<T>) {
      cpu::cpuKernel(iter, [](T a, T b) -> T { return a < b ? b : a; });
    } else {
      cpu::cpuKernel(iter, [](T a, T b) -> T {
        M x = M(a), y = M(b);
        if (x != x || y != y) return T(std::numeric_limits<M>::quiet_NaN());
        return x < y ? b : a;
      });
    }
  });
}

void minimumLoop(const TensorIterator& iter) {
  KILN_DISPATCH_ALL(iter.computeDtype(), "minimum", [&]<typename T>() {
    using M = opmath_t<T>;
    if constexpr (std::is_same_v<T, bool>) {
      cpu::cpuKernel(iter, [](bool a, bool b) -> bool { return a && b; });
    } else if constexpr (std::is_integral_v<T>) {
      cpu::cpuKernel(iter, [](T a, T b) -> T { return b < a ? b : a; });
    } else {
      cpu::cpuKernel(iter, [](T a, T b) -> T {
        M x = M(a), y = M(b);
        if (x != x || y != y) return T(std::numeric_limits<M>::quiet_NaN());
        return y < x ? b : a;
      });
    }
  });
}

void atan2Loop(const TensorIterator& iter) {
  KILN_DISPATCH_FLOATING(iter.computeDtype(), "atan2", [&]<typename T>() {
    using M = opmath_t<T>;
    // glibc's libmvec atan2 (KilnMath.h, as the generated code): libm's scalar call kept the
    // loop scalar (512x1024 floats: 19 ms against torch's 2).
    cpu::cpuKernel(iter, [](T a, T b) -> T { return T(cpu::math::atan2(M(a), M(b))); });
  });
}

enum class Logical { And, Or, Xor };

template <Logical op> void logicalLoop(const TensorIterator& iter) {
  KILN_DISPATCH_ALL(iter.computeDtype(), "logical", [&]<typename T>() {
    using M = std::conditional_t<cpu::isReducedFloat<T>, float, T>;
    cpu::cpuKernel(iter, [](T a, T b) -> bool {
      bool x = M(a) != M(0), y = M(b) != M(0);
      if constexpr (op == Logical::And)
        return x && y;
      else if constexpr (op == Logical::Or)
        return x || y;
      else
        return x != y;
    });
  });
}

template <Logical op> void bitwiseLoop(const TensorIterator& iter) {
  ScalarType t = iter.computeDtype();
  if (isFloatingType(t)) {
    cpu::throwNotImplemented(op == Logical::And  ? "bitwise_and_cpu"
                             : op == Logical::Or ? "bitwise_or_cpu"
                                                 : "bitwise_xor_cpu",
                             t);
  }
  KILN_DISPATCH_ALL(t, "bitwise", [&]<typename T>() {
    if constexpr (std::is_integral_v<T>) {
      cpu::cpuKernel(iter, [](T a, T b) -> T {
        if constexpr (std::is_same_v<T, bool>) {
          if constexpr (op == Logical::And)
            return a && b;
          else if constexpr (op == Logical::Or)
            return a || b;
          else
            return a != b;
        } else {
          if constexpr (op == Logical::And)
            return T(a & b);
          else if constexpr (op == Logical::Or)
            return T(a | b);
          else
            return T(a ^ b);
        }
      });
    }
  });
}

// Shifts by a negative or too large amount give 0 (left) or the sign fill (right), as PyTorch.
void leftShiftLoop(const TensorIterator& iter) {
  ScalarType t = iter.computeDtype();
  if (!isIntegralType(t, false)) cpu::throwNotImplemented("lshift_cpu", t);
  KILN_DISPATCH_INTEGRAL(t, "lshift_cpu", [&]<typename T>() {
    cpu::cpuKernel(iter, [](T a, T b) -> T {
      constexpr T maxShift = T(sizeof(T) * CHAR_BIT);
      if (std::make_signed_t<T>(b) < 0 || b >= maxShift) return T(0);
      return T(std::make_unsigned_t<T>(a) << b);
    });
  });
}

void rightShiftLoop(const TensorIterator& iter) {
  ScalarType t = iter.computeDtype();
  if (!isIntegralType(t, false)) cpu::throwNotImplemented("rshift_cpu", t);
  KILN_DISPATCH_INTEGRAL(t, "rshift_cpu", [&]<typename T>() {
    cpu::cpuKernel(iter, [](T a, T b) -> T {
      constexpr T maxShift = T(sizeof(T) * CHAR_BIT - std::is_signed_v<T>);
      if (std::make_signed_t<T>(b) < 0 || b >= maxShift) return T(a >> maxShift);
      return T(a >> b);
    });
  });
}

} // namespace

Tensor remainder(const Tensor& self, const Tensor& other) {
  return binaryInto("remainder", self, other, PromotionKind::Default, {}, remainderLoop);
}
Tensor remainderScalar(const Tensor& self, const Scalar& other) {
  return remainder(self, Tensor::wrapScalar(other));
}
Tensor remainderScalarTensor(const Scalar& self, const Tensor& other) {
  return remainder(Tensor::wrapScalar(self), other);
}
Tensor remainder_(const Tensor& self, const Tensor& other) {
  return binaryInplace("remainder_", self, other, PromotionKind::Default, remainderLoop);
}
Tensor remainderScalar_(const Tensor& self, const Scalar& other) {
  return remainder_(self, Tensor::wrapScalar(other));
}

Tensor fmod(const Tensor& self, const Tensor& other) {
  return binaryInto("fmod", self, other, PromotionKind::Default, {}, fmodLoop);
}
Tensor fmodScalar(const Tensor& self, const Scalar& other) {
  return fmod(self, Tensor::wrapScalar(other));
}
Tensor fmod_(const Tensor& self, const Tensor& other) {
  return binaryInplace("fmod_", self, other, PromotionKind::Default, fmodLoop);
}
Tensor fmodScalar_(const Tensor& self, const Scalar& other) {
  return fmod_(self, Tensor::wrapScalar(other));
}

Tensor pow(const Tensor& self, const Tensor& exponent) {
  return powInto("pow", self, exponent, {});
}
Tensor powTensorScalar(const Tensor& self, const Scalar& exponent) {
  return powScalarInto("pow", self, exponent, {});
}
Tensor powScalarTensor(const Scalar& self, const Tensor& exponent) {
  Tensor base = Tensor::wrapScalar(self);
  // PyTorch's Scalar::equal(1.0) is false for a bool: pow(True, x) goes through the bool kernel.
  if (!self.isBool() && self.toDouble() == 1.0) {
    ScalarType result = pointwiseResultType({base, exponent}, PromotionKind::Default);
    auto iter = cpu::unaryAs("pow", exponent, result, {});
    if (iter.isMeta()) return iter.output();
    KILN_DISPATCH_ALL(result, "pow",
                      [&]<typename T>() { cpu::cpuKernel(iter, [](T) -> T { return T(1); }); });
    return iter.output();
  }
  return binaryInto("pow", base, exponent, PromotionKind::Default, {}, powLoop);
}
Tensor pow_(const Tensor& self, const Tensor& exponent) {
  return runInplace("pow_", self, pointwiseResultType({self, exponent}, PromotionKind::Default),
                    {exponent},
                    [&](const Tensor& out) { return powInto("pow_", self, exponent, out); });
}
Tensor powTensorScalar_(const Tensor& self, const Scalar& exponent) {
  return pow_(self, Tensor::wrapScalar(exponent));
}

Tensor maximum(const Tensor& self, const Tensor& other) {
  cpu::checkNotNumber("maximum", other, "other", 2);
  return binaryInto("maximum", self, other, PromotionKind::Default, {}, maximumLoop);
}
Tensor minimum(const Tensor& self, const Tensor& other) {
  cpu::checkNotNumber("minimum", other, "other", 2);
  return binaryInto("minimum", self, other, PromotionKind::Default, {}, minimumLoop);
}

Tensor atan2(const Tensor& self, const Tensor& other) {
  cpu::checkNotNumber("atan2", other, "other", 2);
  return binaryInto("atan2", self, other, PromotionKind::IntToFloat, {}, atan2Loop);
}
Tensor atan2_(const Tensor& self, const Tensor& other) {
  cpu::checkNotNumber("atan2_", other, "other", 1);
  return binaryInplace("atan2_", self, other, PromotionKind::IntToFloat, atan2Loop);
}

Tensor logicalAnd(const Tensor& self, const Tensor& other) {
  cpu::checkNotNumber("logical_and", other, "other", 2);
  return binaryInto("logical_and", self, other, PromotionKind::AlwaysBool, {},
                    logicalLoop<Logical::And>);
}
Tensor logicalAnd_(const Tensor& self, const Tensor& other) {
  cpu::checkNotNumber("logical_and_", other, "other", 1);
  return binaryInplace("logical_and_", self, other, PromotionKind::AlwaysBool,
                       logicalLoop<Logical::And>);
}
Tensor logicalOr(const Tensor& self, const Tensor& other) {
  cpu::checkNotNumber("logical_or", other, "other", 2);
  return binaryInto("logical_or", self, other, PromotionKind::AlwaysBool, {},
                    logicalLoop<Logical::Or>);
}
Tensor logicalOr_(const Tensor& self, const Tensor& other) {
  cpu::checkNotNumber("logical_or_", other, "other", 1);
  return binaryInplace("logical_or_", self, other, PromotionKind::AlwaysBool,
                       logicalLoop<Logical::Or>);
}
Tensor logicalXor(const Tensor& self, const Tensor& other) {
  cpu::checkNotNumber("logical_xor", other, "other", 2);
  return binaryInto("logical_xor", self, other, PromotionKind::AlwaysBool, {},
                    logicalLoop<Logical::Xor>);
}
Tensor logicalXor_(const Tensor& self, const Tensor& other) {
  cpu::checkNotNumber("logical_xor_", other, "other", 1);
  return binaryInplace("logical_xor_", self, other, PromotionKind::AlwaysBool,
                       logicalLoop<Logical::Xor>);
}

Tensor bitwiseAnd(const Tensor& self, const Tensor& other) {
  return binaryInto("bitwise_and", self, other, PromotionKind::Default, {},
                    bitwiseLoop<Logical::And>);
}
Tensor bitwiseAndScalar(const Tensor& self, const Scalar& other) {
  return bitwiseAnd(self, Tensor::wrapScalar(other));
}
Tensor bitwiseAndScalarTensor(const Scalar& self, const Tensor& other) {
  return bitwiseAnd(Tensor::wrapScalar(self), other);
}
Tensor bitwiseAnd_(const Tensor& self, const Tensor& other) {
  return binaryInplace("bitwise_and_", self, other, PromotionKind::Default,
                       bitwiseLoop<Logical::And>);
}
Tensor bitwiseAndScalar_(const Tensor& self, const Scalar& other) {
  return bitwiseAnd_(self, Tensor::wrapScalar(other));
}
Tensor bitwiseOr(const Tensor& self, const Tensor& other) {
  return binaryInto("bitwise_or", self, other, PromotionKind::Default, {},
                    bitwiseLoop<Logical::Or>);
}
Tensor bitwiseOrScalar(const Tensor& self, const Scalar& other) {
  return bitwiseOr(self, Tensor::wrapScalar(other));
}
Tensor bitwiseOrScalarTensor(const Scalar& self, const Tensor& other) {
  return bitwiseOr(Tensor::wrapScalar(self), other);
}
Tensor bitwiseOr_(const Tensor& self, const Tensor& other) {
  return binaryInplace("bitwise_or_", self, other, PromotionKind::Default,
                       bitwiseLoop<Logical::Or>);
}
Tensor bitwiseOrScalar_(const Tensor& self, const Scalar& other) {
  return bitwiseOr_(self, Tensor::wrapScalar(other));
}
Tensor bitwiseXor(const Tensor& self, const Tensor& other) {
  return binaryInto("bitwise_xor", self, other, PromotionKind::Default, {},
                    bitwiseLoop<Logical::Xor>);
}
Tensor bitwiseXorScalar(const Tensor& self, const Scalar& other) {
  return bitwiseXor(self, Tensor::wrapScalar(other));
}
Tensor bitwiseXorScalarTensor(const Scalar& self, const Tensor& other) {
  return bitwiseXor(Tensor::wrapScalar(self), other);
}
Tensor bitwiseXor_(const Tensor& self, const Tensor& other) {
  return binaryInplace("bitwise_xor_", self, other, PromotionKind::Default,
                       bitwiseLoop<Logical::Xor>);
}
Tensor bitwiseXorScalar_(const Tensor& self, const Scalar& other) {
  return bitwiseXor_(self, Tensor::wrapScalar(other));
}

Tensor leftShift(const Tensor& self, const Tensor& other) {
  return binaryInto("bitwise_left_shift", self, other, PromotionKind::Default, {}, leftShiftLoop);
}
Tensor leftShiftScalar(const Tensor& self, const Scalar& other) {
  return leftShift(self, Tensor::wrapScalar(other));
}
Tensor leftShiftScalarTensor(const Scalar& self, const Tensor& other) {
  return leftShift(Tensor::wrapScalar(self), other);
}
Tensor leftShift_(const Tensor& self, const Tensor& other) {
  return binaryInplace("bitwise_left_shift_", self, other, PromotionKind::Default, leftShiftLoop);
}
Tensor leftShiftScalar_(const Tensor& self, const Scalar& other) {
  return leftShift_(self, Tensor::wrapScalar(other));
}
Tensor rightShift(const Tensor& self, const Tensor& other) {
  return binaryInto("bitwise_right_shift", self, other, PromotionKind::Default, {}, rightShiftLoop);
}
Tensor rightShiftScalar(const Tensor& self, const Scalar& other) {
  return rightShift(self, Tensor::wrapScalar(other));
}
Tensor rightShiftScalarTensor(const Scalar& self, const Tensor& other) {
  return rightShift(Tensor::wrapScalar(self), other);
}
Tensor rightShift_(const Tensor& self, const Tensor& other) {
  return binaryInplace("bitwise_right_shift_", self, other, PromotionKind::Default, rightShiftLoop);
}
Tensor rightShiftScalar_(const Tensor& self, const Scalar& other) {
  return rightShift_(self, Tensor::wrapScalar(other));
}

} // namespace kiln::kernels
