// The Complex key's pointwise kernels: arithmetic, exp, abs, comparisons, in real ops on the
// operands' (re, im) parts, so that autograd and tracing see only real ops (docs/complex.md).
#include <cmath>

#include "generated/KernelDecls.h"
#include "generated/Ops.h"
#include "runtime/Error.h"
#include "runtime/complex/ComplexParts.h"

namespace kiln::kernels {

using complex::fromParts;
using complex::partsOf;

namespace {

ScalarType realOf(const char* op, const Tensor& a, const Tensor& b) {
  return toRealValueType(complex::complexResultType(op, {a, b}));
}

// a + alpha * b over parts; an undefined im is zero.
Tensor addParts(const Tensor& a, const Tensor& b, const Scalar& alpha) {
  if (!b.defined()) return a;
  if (!a.defined()) return ops::mul(b, alpha);
  return ops::add(a, b, alpha);
}

Tensor negOrUndefined(const Tensor& t) { return t.defined() ? ops::neg(t) : t; }

// An in-place op: the functional result written into self where its dtype may be.
Tensor writeInto(const char* op, const Tensor& self, const Tensor& result) {
  KILN_CHECK(canCast(result.dtype(), self.dtype()), op, ": result type ",
             scalarTypeShortName(result.dtype()), " can't be cast to the desired output type ",
             scalarTypeShortName(self.dtype()));
  return ops::copy_(self, result, false);
}

Tensor mulParts(const complex::Parts& a, const complex::Parts& b) {
  // (ar + i ai)(br + i bi) = (ar br - ai bi) + i (ar bi + ai br)
  Tensor re = ops::mul(a.re, b.re);
  if (a.im.defined() && b.im.defined()) re = ops::sub(re, ops::mul(a.im, b.im));
  Tensor im = addParts(a.im.defined() ? ops::mul(a.im, b.re) : Tensor(),
                       b.im.defined() ? ops::mul(a.re, b.im) : Tensor(), Scalar(int64_t(1)));
  return fromParts(re, im);
}

Tensor divParts(const complex::Parts& a, const complex::Parts& b) {
  if (!b.im.defined())
    return fromParts(ops::div(a.re, b.re), a.im.defined() ? ops::div(a.im, b.re) : Tensor());
  // a / b = a conj(b) / |b|^2
  Tensor denom = ops::add(ops::mul(b.re, b.re), ops::mul(b.im, b.im));
  Tensor re = ops::mul(a.re, b.re), im = ops::neg(ops::mul(a.re, b.im));
  if (a.im.defined()) {
    re = ops::add(re, ops::mul(a.im, b.im));
    im = ops::add(im, ops::mul(a.im, b.re));
  }
  return fromParts(ops::div(re, denom), ops::div(im, denom));
}

void checkNoRoundingMode(const char* op, const std::optional<std::string>& mode) {
  KILN_CHECK_TYPE(!mode, op, ": rounding_mode='", mode.value_or(""),
                  "' is not supported for complex tensors");
}

Tensor scalarTensor(const Scalar& s) { return Tensor::wrapScalar(s); }

} // namespace

Tensor complexAdd(const Tensor& self, const Tensor& other, const Scalar& alpha) {
  ScalarType real = realOf("add", self, other);
  auto a = partsOf(self, real), b = partsOf(other, real);
  return fromParts(ops::add(a.re, b.re, alpha), addParts(a.im, b.im, alpha));
}
Tensor complexAddScalar(const Tensor& self, const Scalar& other, const Scalar& alpha) {
  return complexAdd(self, scalarTensor(other), alpha);
}
Tensor complexAddScalarTensor(const Scalar& self, const Tensor& other, const Scalar& alpha) {
  return complexAdd(scalarTensor(self), other, alpha);
}
Tensor complexSub(const Tensor& self, const Tensor& other, const Scalar& alpha) {
  ScalarType real = realOf("sub", self, other);
  auto a = partsOf(self, real), b = partsOf(other, real);
  return fromParts(ops::sub(a.re, b.re, alpha), addParts(a.im, negOrUndefined(b.im), alpha));
}
Tensor complexSubScalar(const Tensor& self, const Scalar& other, const Scalar& alpha) {
  return complexSub(self, scalarTensor(other), alpha);
}
Tensor complexSubScalarTensor(const Scalar& self, const Tensor& other, const Scalar& alpha) {
  return complexSub(scalarTensor(self), other, alpha);
}
Tensor complexRsub(const Tensor& self, const Tensor& other, const Scalar& alpha) {
  return complexSub(other, self, alpha);
}
Tensor complexRsubScalar(const Tensor& self, const Scalar& other, const Scalar& alpha) {
  return complexSub(scalarTensor(other), self, alpha);
}

Tensor complexMul(const Tensor& self, const Tensor& other) {
  ScalarType real = realOf("mul", self, other);
  return mulParts(partsOf(self, real), partsOf(other, real));
}
Tensor complexMulScalar(const Tensor& self, const Scalar& other) {
  return complexMul(self, scalarTensor(other));
}
Tensor complexMulScalarTensor(const Scalar& self, const Tensor& other) {
  return complexMul(scalarTensor(self), other);
}

Tensor complexDiv(const Tensor& self, const Tensor& other) {
  ScalarType real = realOf("div", self, other);
  return divParts(partsOf(self, real), partsOf(other, real));
}
Tensor complexDivMode(const Tensor& self, const Tensor& other, const std::optional<std::string>& mode) {
  checkNoRoundingMode("div", mode);
  return complexDiv(self, other);
}
Tensor complexDivScalar(const Tensor& self, const Scalar& other) {
  return complexDiv(self, scalarTensor(other));
}
Tensor complexDivScalarMode(const Tensor& self, const Scalar& other, const std::optional<std::string>& mode) {
  checkNoRoundingMode("div", mode);
  return complexDiv(self, scalarTensor(other));
}
Tensor complexDivScalarTensor(const Scalar& self, const Tensor& other, const std::optional<std::string>& mode) {
  checkNoRoundingMode("div", mode);
  return complexDiv(scalarTensor(self), other);
}

Tensor complexAdd_(const Tensor& self, const Tensor& other, const Scalar& alpha) {
  return writeInto("add_", self, complexAdd(self, other, alpha));
}
Tensor complexAddScalar_(const Tensor& self, const Scalar& other, const Scalar& alpha) {
  return writeInto("add_", self, complexAddScalar(self, other, alpha));
}
Tensor complexSub_(const Tensor& self, const Tensor& other, const Scalar& alpha) {
  return writeInto("sub_", self, complexSub(self, other, alpha));
}
Tensor complexSubScalar_(const Tensor& self, const Scalar& other, const Scalar& alpha) {
  return writeInto("sub_", self, complexSubScalar(self, other, alpha));
}
Tensor complexMul_(const Tensor& self, const Tensor& other) {
  return writeInto("mul_", self, complexMul(self, other));
}
Tensor complexMulScalar_(const Tensor& self, const Scalar& other) {
  return writeInto("mul_", self, complexMulScalar(self, other));
}
Tensor complexDiv_(const Tensor& self, const Tensor& other) {
  return writeInto("div_", self, complexDiv(self, other));
}
Tensor complexDivScalar_(const Tensor& self, const Scalar& other) {
  return writeInto("div_", self, complexDivScalar(self, other));
}

Tensor complexNeg(const Tensor& self) {
  return ops::view_as_complex(ops::neg(ops::view_as_real(self)));
}

Tensor complexReciprocal(const Tensor& self) {
  ScalarType real = toRealValueType(self.dtype());
  return divParts(partsOf(Tensor::wrapScalar(Scalar(1.0)), real), partsOf(self, real));
}

Tensor complexExp(const Tensor& self) {
  // exp(a + ib) = e^a (cos b + i sin b)
  auto z = partsOf(self, toRealValueType(self.dtype()));
  Tensor scale = ops::exp(z.re);
  return fromParts(ops::mul(scale, ops::cos(z.im)), ops::mul(scale, ops::sin(z.im)));
}

// |z| as the 2-norm of its (re, im) pair: the norm's gradient is zero at zero, as torch's
// abs backward (grad * sgn(z)) is.
Tensor complexAbs(const Tensor& self) {
  return ops::linalg_vector_norm(ops::view_as_real(self), Scalar(2.0), std::vector<int64_t>{-1},
                                 false, std::nullopt);
}

Tensor complexEq(const Tensor& self, const Tensor& other) {
  ScalarType real = realOf("eq", self, other);
  auto a = partsOf(self, real), b = partsOf(other, real);
  Tensor zero = Tensor::wrapScalar(Scalar(0.0));
  return ops::logical_and(ops::eq(a.re, b.re), ops::eq(a.im.defined() ? a.im : zero,
                                                       b.im.defined() ? b.im : zero));
}
Tensor complexNe(const Tensor& self, const Tensor& other) {
  return ops::logical_not(complexEq(self, other));
}
Tensor complexEqScalar(const Tensor& self, const Scalar& other) {
  return complexEq(self, scalarTensor(other));
}
Tensor complexNeScalar(const Tensor& self, const Scalar& other) {
  return complexNe(self, scalarTensor(other));
}

// torch's isclose: |a - b| <= atol + rtol * |b|, or a == b (infinities).
Tensor complexIsclose(const Tensor& self, const Tensor& other, double rtol, double atol, bool equalNan) {
  KILN_CHECK(self.dtype() == other.dtype(), scalarTypeShortName(self.dtype()), " did not match ",
             scalarTypeShortName(other.dtype()));
  Tensor close = ops::le(ops::abs(ops::sub(self, other, Scalar(int64_t(1)))),
                         ops::add(ops::mul(ops::abs(other), Scalar(rtol)), Scalar(atol), Scalar(int64_t(1))));
  close = ops::logical_or(close, complexEq(self, other));
  if (equalNan) {
    Tensor a = ops::view_as_real(self), b = ops::view_as_real(other);
    Tensor nanA = ops::anyDim(ops::isnan(a), -1, false), nanB = ops::anyDim(ops::isnan(b), -1, false);
    close = ops::logical_or(close, ops::logical_and(nanA, nanB));
  }
  return close;
}
bool complexAllclose(const Tensor& self, const Tensor& other, double rtol, double atol, bool equalNan) {
  return ops::all(complexIsclose(self, other, rtol, atol, equalNan)).item().toBool();
}

} // namespace kiln::kernels
