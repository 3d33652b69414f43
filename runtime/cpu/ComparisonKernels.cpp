// Comparisons (eq ne lt le gt ge, computed in the promoted dtype with bool results, and their
// in-place forms) and closeness tests: isclose, allclose, equal.
#include <cmath>

#include "generated/KernelDecls.h"
#include "runtime/cpu/Loops.h"
#include "runtime/cpu/PointwiseOps.h"

namespace kiln::kernels {

namespace {

using cpu::binaryInplace;
using cpu::binaryInto;

enum class Cmp { Eq, Ne, Lt, Le, Gt, Ge };

template <Cmp op> void compareLoop(const TensorIterator& iter) {
  KILN_DISPATCH_ALL(iter.computeDtype(), "compare", [&]<typename T>() {
    using M = std::conditional_t<std::is_same_v<T, Half> || std::is_same_v<T, BFloat16>, float, T>;
    cpu::cpuKernel(iter, [](T a, T b) -> bool {
      M x = M(a), y = M(b);
      if constexpr (op == Cmp::Eq)
        return x == y;
      else if constexpr (op == Cmp::Ne)
        return x != y;
      else if constexpr (op == Cmp::Lt)
        return x < y;
      else if constexpr (op == Cmp::Le)
        return x <= y;
      else if constexpr (op == Cmp::Gt)
        return x > y;
      else
        return x >= y;
    });
  });
}

template <Cmp op> Tensor compare(const char* name, const Tensor& self, const Tensor& other) {
  return binaryInto(name, self, other, PromotionKind::AlwaysBool, {}, compareLoop<op>);
}

template <Cmp op> Tensor compareInplace(const char* name, const Tensor& self, const Tensor& other) {
  return binaryInplace(name, self, other, PromotionKind::AlwaysBool, compareLoop<op>);
}

// |a - b| <= atol + rtol * |b| (finite), or a == b, or both NaN with equal_nan. Floating inputs
// compute in their dtype, rounding each step to it as PyTorch's tensor arithmetic does; other
// dtypes compute the tolerance test in float32 (PyTorch's default dtype) but compare exactly.
Tensor iscloseInto(const char* name, const Tensor& self, const Tensor& other, double rtol,
                   double atol, bool equalNan) {
  KILN_CHECK(self.dtype() == other.dtype(), scalarTypeShortName(self.dtype()), " did not match ",
             scalarTypeShortName(other.dtype()));
  KILN_CHECK(rtol >= 0, "rtol must be greater than or equal to zero, but got ", rtol);
  KILN_CHECK(atol >= 0, "atol must be greater than or equal to zero, but got ", atol);
  bool exactOnly = rtol == 0 && atol == 0;
  auto iter = TensorIterator::binary(name, self, other, PromotionKind::AlwaysBool);
  if (iter.isMeta()) return iter.output();
  KILN_DISPATCH_ALL(iter.computeDtype(), name, [&]<typename T>() {
    using M = std::conditional_t<std::is_same_v<T, double>, double, float>;
    constexpr bool floating = !std::is_integral_v<T>;
    M rt = M(rtol), at = M(atol);
    bool nanEqual = equalNan && floating;
    cpu::cpuKernel(iter, [=](T a, T b) -> bool {
      M x = M(a), y = M(b);
      if (x == y) {
        if constexpr (floating)
          return true;
        else
          return a == b || !exactOnly;
      }
      if constexpr (floating) {
        if (nanEqual && x != x && y != y) return true;
      }
      if (exactOnly) return false;
      M allowed, actual;
      if constexpr (floating) {
        allowed = M(T(at + std::abs(M(T(rt * y)))));
        actual = std::abs(M(T(x - y)));
      } else {
        allowed = at + std::abs(rt * y);
        actual = std::abs(x - y);
      }
      return std::isfinite(actual) && actual <= allowed;
    });
  });
  return iter.output();
}

} // namespace

Tensor eq(const Tensor& self, const Tensor& other) { return compare<Cmp::Eq>("eq", self, other); }
Tensor ne(const Tensor& self, const Tensor& other) { return compare<Cmp::Ne>("ne", self, other); }
Tensor lt(const Tensor& self, const Tensor& other) { return compare<Cmp::Lt>("lt", self, other); }
Tensor le(const Tensor& self, const Tensor& other) { return compare<Cmp::Le>("le", self, other); }
Tensor gt(const Tensor& self, const Tensor& other) { return compare<Cmp::Gt>("gt", self, other); }
Tensor ge(const Tensor& self, const Tensor& other) { return compare<Cmp::Ge>("ge", self, other); }

Tensor eqScalar(const Tensor& self, const Scalar& other) {
  return eq(self, Tensor::wrapScalar(other));
}
Tensor neScalar(const Tensor& self, const Scalar& other) {
  return ne(self, Tensor::wrapScalar(other));
}
Tensor ltScalar(const Tensor& self, const Scalar& other) {
  return lt(self, Tensor::wrapScalar(other));
}
Tensor leScalar(const Tensor& self, const Scalar& other) {
  return le(self, Tensor::wrapScalar(other));
}
Tensor gtScalar(const Tensor& self, const Scalar& other) {
  return gt(self, Tensor::wrapScalar(other));
}
Tensor geScalar(const Tensor& self, const Scalar& other) {
  return ge(self, Tensor::wrapScalar(other));
}

Tensor eq_(const Tensor& self, const Tensor& other) {
  return compareInplace<Cmp::Eq>("eq_", self, other);
}
Tensor ne_(const Tensor& self, const Tensor& other) {
  return compareInplace<Cmp::Ne>("ne_", self, other);
}
Tensor lt_(const Tensor& self, const Tensor& other) {
  return compareInplace<Cmp::Lt>("lt_", self, other);
}
Tensor le_(const Tensor& self, const Tensor& other) {
  return compareInplace<Cmp::Le>("le_", self, other);
}
Tensor gt_(const Tensor& self, const Tensor& other) {
  return compareInplace<Cmp::Gt>("gt_", self, other);
}
Tensor ge_(const Tensor& self, const Tensor& other) {
  return compareInplace<Cmp::Ge>("ge_", self, other);
}

Tensor eqScalar_(const Tensor& self, const Scalar& other) {
  return eq_(self, Tensor::wrapScalar(other));
}
Tensor neScalar_(const Tensor& self, const Scalar& other) {
  return ne_(self, Tensor::wrapScalar(other));
}
Tensor ltScalar_(const Tensor& self, const Scalar& other) {
  return lt_(self, Tensor::wrapScalar(other));
}
Tensor leScalar_(const Tensor& self, const Scalar& other) {
  return le_(self, Tensor::wrapScalar(other));
}
Tensor gtScalar_(const Tensor& self, const Scalar& other) {
  return gt_(self, Tensor::wrapScalar(other));
}
Tensor geScalar_(const Tensor& self, const Scalar& other) {
  return ge_(self, Tensor::wrapScalar(other));
}

Tensor isclose(const Tensor& self, const Tensor& other, double rtol, double atol, bool equalNan) {
  cpu::checkNotNumber("isclose", other, "other", 2);
  return iscloseInto("isclose", self, other, rtol, atol, equalNan);
}

bool allclose(const Tensor& self, const Tensor& other, double rtol, double atol, bool equalNan) {
  cpu::checkNotNumber("allclose", other, "other", 2);
  Tensor close = iscloseInto("allclose", self, other, rtol, atol, equalNan);
  KILN_CHECK(!close.isMeta(), "Tensor.item() cannot be called on meta tensors");
  return cpu::allTrue(close);
}

bool equal(const Tensor& self, const Tensor& other) {
  cpu::checkNotNumber("equal", other, "other", 2);
  KILN_CHECK(!self.isMeta() && !other.isMeta(),
             "aten::equal: attempted to run this operator with Meta tensors");
  if (self.sizes() != other.sizes()) return false;
  return cpu::allTrue(eq(self, other));
}

} // namespace kiln::kernels
