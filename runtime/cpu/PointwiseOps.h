// Pieces shared by the pointwise kernels: the result dtype of an op, running an op in place,
// c10's checked Scalar conversions, and the checks PyTorch words in its own way.
#pragma once
#include <cmath>
#include <functional>
#include <limits>
#include <type_traits>
#include <vector>

#include "runtime/TensorIterator.h"

namespace kiln::cpu {

template <typename T>
constexpr bool isReducedFloat = std::is_same_v<T, Half> || std::is_same_v<T, BFloat16>;

// PyTorch's elementwise result dtype of `inputs` under a promotion kind.
ScalarType pointwiseResultType(const std::vector<Tensor>& inputs, PromotionKind kind);

// Runs an op in place on self. `compute(out)` evaluates the op into `out`, or into a new tensor
// when `out` is undefined, and returns the result. It writes straight into self when the op's
// result dtype is self's and no other input shares memory with self in another layout; otherwise
// it computes into a temporary and copies (casting) into self. Returns self.
Tensor runInplace(const char* op, const Tensor& self, ScalarType resultType,
                  const std::vector<Tensor>& others,
                  const std::function<Tensor(const Tensor& out)>& compute);

// A unary iterator that computes in and writes `dtype` (inputs cast to it).
TensorIterator unaryAs(const char* op, const Tensor& self, ScalarType dtype, const Tensor& out);

// PyTorch computes a 16-bit-float op with a one-element second operand in float from that
// operand's original value (CPU kernels of mul, div, ...). True when that case applies.
bool isReducedFloatScalarCase(const Tensor& self, const Tensor& other, ScalarType result);

// Runs `loop(iter)` (dtype checks, dispatch, cpuKernel) for `self op other`, into `out` if given.
template <typename Loop>
Tensor binaryInto(const char* name, const Tensor& self, const Tensor& other, PromotionKind kind,
                  const Tensor& out, const Loop& loop) {
  auto iter = TensorIterator::binary(name, self, other, kind, out);
  if (!iter.isMeta()) loop(iter); // meta: shapes and dtypes only, no dtype dispatch
  return iter.output();
}

// The in-place form of binaryInto: `self op= other`.
template <typename Loop>
Tensor binaryInplace(const char* name, const Tensor& self, const Tensor& other, PromotionKind kind,
                     const Loop& loop) {
  return runInplace(
      name, self, pointwiseResultType({self, other}, kind), {other},
      [&](const Tensor& out) { return binaryInto(name, self, other, kind, out, loop); });
}

// NotImplementedError("\"kernel\" not implemented for 'Bool'"), as PyTorch's dtype dispatch.
[[noreturn]] void throwNotImplemented(const char* kernel, ScalarType t);

// TypeError for a Python number where PyTorch accepts only a tensor (maximum, atan2, ...).
void checkNotNumber(const char* op, const Tensor& t, const char* argName, int position);

// RuntimeError("ZeroDivisionError") when an integral divisor holds a zero (checked before the
// loop: kernels never throw).
void checkNoIntegerZero(const TensorIterator& iter, int divisorInput);

// True when every element of a bool tensor is true (serial: used for equal/allclose).
bool allTrue(const Tensor& t);

// The C++ type name c10 prints in "value cannot be converted to type T without overflow".
const char* c10TypeName(ScalarType t);

// c10's Scalar::to<T>(): RuntimeError when the value does not fit T (negative integers may
// wrap into unsigned types; infinities and NaN fit floating types).
template <typename T> T checkedScalarTo(const Scalar& s) {
  constexpr bool integral = std::is_integral_v<T>;
  double maxValue, lowest;
  if constexpr (std::is_same_v<T, Half>)
    maxValue = 65504.0;
  else if constexpr (std::is_same_v<T, BFloat16>)
    maxValue = 3.3895313892515355e38;
  else
    maxValue = double(std::numeric_limits<T>::max());
  if constexpr (integral)
    lowest = double(std::numeric_limits<T>::lowest());
  else
    lowest = -maxValue;
  bool overflow = false;
  if (s.isFloating()) {
    double v = s.toDouble();
    if constexpr (integral)
      overflow = std::isnan(v) || v < lowest || v > maxValue;
    else
      overflow = std::isfinite(v) && (v < lowest || v > maxValue);
  } else if (s.isIntegral()) {
    double v = double(s.toInt());
    if constexpr (integral && !std::is_signed_v<T>)
      overflow = v > maxValue || -v > maxValue;
    else
      overflow = v < lowest || v > maxValue;
  }
  KILN_CHECK(!overflow, "value cannot be converted to type ", c10TypeName(ScalarTypeOf<T>::value),
             " without overflow");
  return s.to<T>();
}

// Two's-complement negation without signed-overflow UB (-INT_MIN wraps to INT_MIN).
template <typename T> inline T wrappingNeg(T x) {
  if constexpr (std::is_integral_v<T>)
    return T(std::make_unsigned_t<T>(0) - std::make_unsigned_t<T>(x));
  else
    return -x;
}

// Integer +, -, * that wrap on overflow instead of being undefined (int32/int64 compute in the
// unsigned type; narrower types are promoted to int by C++ and cannot overflow it).
template <typename T> inline T wrappingAdd(T x, T y) {
  if constexpr (std::is_integral_v<T> && sizeof(T) >= 4)
    return T(std::make_unsigned_t<T>(x) + std::make_unsigned_t<T>(y));
  else
    return T(x + y);
}
template <typename T> inline T wrappingSub(T x, T y) {
  if constexpr (std::is_integral_v<T> && sizeof(T) >= 4)
    return T(std::make_unsigned_t<T>(x) - std::make_unsigned_t<T>(y));
  else
    return T(x - y);
}
template <typename T> inline T wrappingMul(T x, T y) {
  if constexpr (std::is_integral_v<T> && sizeof(T) >= 4)
    return T(std::make_unsigned_t<T>(x) * std::make_unsigned_t<T>(y));
  else
    return T(x * y);
}

// Integer division and modulo that are defined for every input with a nonzero divisor:
// INT_MIN / -1 wraps (x86 would trap), INT_MIN % -1 is 0.
template <typename T> inline T truncDiv(T x, T y) {
  if constexpr (std::is_signed_v<T>) {
    if (y == T(-1)) return wrappingNeg(x);
  }
  return T(x / y);
}
template <typename T> inline T truncMod(T x, T y) {
  if constexpr (std::is_signed_v<T>) {
    if (y == T(-1)) return T(0);
  }
  return T(x % y);
}

} // namespace kiln::cpu
