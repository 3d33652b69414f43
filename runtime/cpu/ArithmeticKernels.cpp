// add, sub, mul, div (true, trunc and floor rounding).
#include <cmath>

#include "generated/KernelDecls.h"
#include "runtime/cpu/Loops.h"

namespace kiln::kernels {

namespace {

void checkAlpha(const char* op, ScalarType dtype, const Scalar& alpha) {
  KILN_CHECK(!(isIntegralType(dtype, true) && alpha.isFloating()), op,
             ": For integral input tensors, argument alpha must not be a floating point number.");
  KILN_CHECK(!(dtype == ScalarType::Bool && alpha.isIntegral() && alpha.toInt() != 1 &&
               alpha.toInt() != 0),
             op, ": Boolean alpha only supported for Boolean results.");
}

} // namespace

Tensor add(const Tensor& self, const Tensor& other, const Scalar& alpha) {
  auto iter = TensorIterator::binary("add", self, other);
  checkAlpha("add", iter.computeDtype(), alpha);
  KILN_DISPATCH_ALL(iter.computeDtype(), "add", [&]<typename scalar_t>() {
    using T = scalar_t;
    using M = opmath_t<T>;
    if constexpr (std::is_same_v<T, bool>) {
      bool a = alpha.toBool();
      cpu::cpuKernel(iter, [a](bool x, bool y) -> bool { return x || (a && y); });
    } else if (alpha.toDouble() == 1.0) {
      cpu::cpuKernel(iter, [](T x, T y) -> T { return T(M(x) + M(y)); });
    } else {
      M a = alpha.to<M>();
      cpu::cpuKernel(iter, [a](T x, T y) -> T { return T(M(x) + a * M(y)); });
    }
  });
  return iter.output();
}

Tensor sub(const Tensor& self, const Tensor& other, const Scalar& alpha) {
  KILN_CHECK(self.dtype() != ScalarType::Bool || other.dtype() != ScalarType::Bool,
             "sub: Subtraction, the `-` operator, with two bool tensors is not supported. Use the "
             "`^` or `logical_xor()` operator instead.");
  auto iter = TensorIterator::binary("sub", self, other);
  checkAlpha("sub", iter.computeDtype(), alpha);
  KILN_DISPATCH_NUMERIC(iter.computeDtype(), "sub", [&]<typename scalar_t>() {
    using T = scalar_t;
    using M = opmath_t<T>;
    if (alpha.toDouble() == 1.0) {
      cpu::cpuKernel(iter, [](T x, T y) -> T { return T(M(x) - M(y)); });
    } else {
      M a = alpha.to<M>();
      cpu::cpuKernel(iter, [a](T x, T y) -> T { return T(M(x) - a * M(y)); });
    }
  });
  return iter.output();
}

Tensor mul(const Tensor& self, const Tensor& other) {
  auto iter = TensorIterator::binary("mul", self, other);
  KILN_DISPATCH_ALL(iter.computeDtype(), "mul", [&]<typename scalar_t>() {
    using T = scalar_t;
    using M = opmath_t<T>;
    if constexpr (std::is_same_v<T, bool>) cpu::cpuKernel(iter, [](bool x, bool y) -> bool { return x && y; });
    else cpu::cpuKernel(iter, [](T x, T y) -> T { return T(M(x) * M(y)); });
  });
  return iter.output();
}

Tensor div(const Tensor& self, const Tensor& other) {
  auto iter = TensorIterator::binary("div", self, other, PromotionKind::IntToFloat);
  KILN_DISPATCH_FLOATING(iter.computeDtype(), "div", [&]<typename scalar_t>() {
    using T = scalar_t;
    using M = opmath_t<T>;
    cpu::cpuKernel(iter, [](T x, T y) -> T { return T(M(x) / M(y)); });
  });
  return iter.output();
}

Tensor divMode(const Tensor& self, const Tensor& other, const std::optional<std::string>& mode) {
  if (!mode) return div(self, other);
  KILN_CHECK(*mode == "trunc" || *mode == "floor",
                   "div expected rounding_mode to be one of None, 'trunc', or 'floor' but found '",
                   *mode, "'");
  bool floorMode = *mode == "floor";
  auto iter = TensorIterator::binary("div", self, other);
  if (isIntegralType(iter.computeDtype(), true) && !iter.isMeta()) {
    // Integer division by zero is an error, not UB: look before running the loop.
    Tensor divisor = iter.input(1);
    bool zero = KILN_DISPATCH_ALL(divisor.dtype(), "div", [&]<typename scalar_t>() {
      bool found = false;
      auto check = TensorIterator::unary("div", divisor, PromotionKind::None);
      check.forEach([&](char** data, const int64_t* strides, int64_t n) {
        for (int64_t i = 0; i < n; ++i)
          if (*reinterpret_cast<scalar_t*>(data[1] + i * strides[1]) == scalar_t(0)) found = true;
      }, int64_t(1) << 62);
      return found;
    });
    if (zero) throw Error("ZeroDivisionError");
  }
  KILN_DISPATCH_NUMERIC(iter.computeDtype(), "div", [&]<typename scalar_t>() {
    using T = scalar_t;
    using M = opmath_t<T>;
    if constexpr (std::is_integral_v<T>) {
      if (floorMode) {
        cpu::cpuKernel(iter, [](T x, T y) -> T {
          T q = T(x / y);
          if ((x % y != 0) && ((x < 0) != (y < 0))) q = T(q - 1);
          return q;
        });
      } else {
        cpu::cpuKernel(iter, [](T x, T y) -> T { return T(x / y); });
      }
    } else if (floorMode) {
      // PyTorch's div_floor: fmod-based, exact for floats.
      cpu::cpuKernel(iter, [](T a, T b) -> T {
        M x = M(a), y = M(b);
        if (y == 0) return T(x / y);
        M mod = std::fmod(x, y);
        M div = (x - mod) / y;
        if (mod != 0 && ((y < 0) != (mod < 0))) div -= 1;
        M floordiv;
        if (div != 0) {
          floordiv = std::floor(div);
          if (div - floordiv > M(0.5)) floordiv += 1;
        } else {
          floordiv = std::copysign(M(0), x / y);
        }
        return T(floordiv);
      });
    } else {
      cpu::cpuKernel(iter, [](T x, T y) -> T { return T(std::trunc(M(x) / M(y))); });
    }
  });
  return iter.output();
}

} // namespace kiln::kernels
