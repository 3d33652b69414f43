// Elementwise prims (prims.exp, prims.add, prims.where, prims.convert_element_type, ...): the
// eager pointwise kernels behind a strict front: operands of equal shapes and dtypes, so the
// kernels neither broadcast nor promote, and each result has the dtype the prim's schema says.
#include <cstdint>
#include <initializer_list>

#include "generated/KernelDecls.h"

namespace kiln::kernels {

namespace {

// The Prims IR has no implicit broadcasting or promotion: every tensor operand must have the
// first one's shape, dtype and device (decompositions insert broadcast_in_dim and
// convert_element_type where an ATen op broadcasts or promotes).
void checkSameShapeDtypeDevice(const char* op, std::initializer_list<const Tensor*> operands) {
  const Tensor& first = **operands.begin();
  for (const Tensor* t : operands) {
    KILN_CHECK(t->sizes() == first.sizes(), op,
               ": operands must have equal shapes (prims do not broadcast), got ",
               first.shapeString(), " and ", t->shapeString());
    KILN_CHECK(t->dtype() == first.dtype(), op,
               ": operands must have equal dtypes (prims do not promote), got ",
               scalarTypeName(first.dtype()), " and ", scalarTypeName(t->dtype()));
    KILN_CHECK(t->device() == first.device(), op, ": operands must be on one device, got ",
               first.device().str(), " and ", t->device().str());
  }
}

void checkFloating(const char* op, const Tensor& a) {
  KILN_CHECK(isFloatingType(a.dtype()), op, ": expected a floating tensor, got ",
             scalarTypeName(a.dtype()), " (convert_element_type it first)");
}

void checkNotBool(const char* op, const Tensor& a) {
  KILN_CHECK(a.dtype() != ScalarType::Bool, op, ": bool tensors are not supported");
}

void checkIntegral(const char* op, const Tensor& a) {
  KILN_CHECK(isIntegralType(a.dtype(), /*includeBool=*/true), op,
             ": expected an integer or bool tensor, got ", scalarTypeName(a.dtype()));
}

template <typename Kernel> Tensor floatUnary(const char* op, const Tensor& a, Kernel kernel) {
  checkFloating(op, a);
  return kernel(a);
}

template <typename Kernel> Tensor numericUnary(const char* op, const Tensor& a, Kernel kernel) {
  checkNotBool(op, a);
  return kernel(a);
}

template <typename Kernel>
Tensor binary(const char* op, const Tensor& a, const Tensor& b, Kernel kernel) {
  checkSameShapeDtypeDevice(op, {&a, &b});
  return kernel(a, b);
}

const Scalar kOne = Scalar(int64_t(1));

} // namespace

// -- unary math of floating tensors ---------------------------------------------------------

Tensor primsExp(const Tensor& a) { return floatUnary("prims.exp", a, exp); }
Tensor primsExp2(const Tensor& a) { return floatUnary("prims.exp2", a, exp2); }
Tensor primsExpm1(const Tensor& a) { return floatUnary("prims.expm1", a, expm1); }
Tensor primsLog(const Tensor& a) { return floatUnary("prims.log", a, log); }
Tensor primsLog2(const Tensor& a) { return floatUnary("prims.log2", a, log2); }
Tensor primsLog10(const Tensor& a) { return floatUnary("prims.log10", a, log10); }
Tensor primsLog1p(const Tensor& a) { return floatUnary("prims.log1p", a, log1p); }
Tensor primsSqrt(const Tensor& a) { return floatUnary("prims.sqrt", a, sqrt); }
Tensor primsRsqrt(const Tensor& a) { return floatUnary("prims.rsqrt", a, rsqrt); }
Tensor primsSin(const Tensor& a) { return floatUnary("prims.sin", a, sin); }
Tensor primsCos(const Tensor& a) { return floatUnary("prims.cos", a, cos); }
Tensor primsTan(const Tensor& a) { return floatUnary("prims.tan", a, tan); }
Tensor primsAsin(const Tensor& a) { return floatUnary("prims.asin", a, asin); }
Tensor primsAcos(const Tensor& a) { return floatUnary("prims.acos", a, acos); }
Tensor primsAtan(const Tensor& a) { return floatUnary("prims.atan", a, atan); }
Tensor primsSinh(const Tensor& a) { return floatUnary("prims.sinh", a, sinh); }
Tensor primsCosh(const Tensor& a) { return floatUnary("prims.cosh", a, cosh); }
Tensor primsTanh(const Tensor& a) { return floatUnary("prims.tanh", a, tanh); }
Tensor primsErf(const Tensor& a) { return floatUnary("prims.erf", a, erf); }
Tensor primsReciprocal(const Tensor& a) { return floatUnary("prims.reciprocal", a, reciprocal); }

// -- unary ops of any numeric dtype ---------------------------------------------------------

Tensor primsAbs(const Tensor& a) { return numericUnary("prims.abs", a, abs); }
Tensor primsNeg(const Tensor& a) { return numericUnary("prims.neg", a, neg); }
Tensor primsSign(const Tensor& a) { return numericUnary("prims.sign", a, sign); }
Tensor primsFloor(const Tensor& a) { return numericUnary("prims.floor", a, floor); }
Tensor primsCeil(const Tensor& a) { return numericUnary("prims.ceil", a, ceil); }
Tensor primsRound(const Tensor& a) { return numericUnary("prims.round", a, round); }
Tensor primsTrunc(const Tensor& a) { return numericUnary("prims.trunc", a, trunc); }

Tensor primsBitwiseNot(const Tensor& a) {
  checkIntegral("prims.bitwise_not", a);
  return bitwiseNot(a);
}

Tensor primsIsfinite(const Tensor& a) { return isfinite(a); }

// -- binary ops -----------------------------------------------------------------------------

Tensor primsAdd(const Tensor& a, const Tensor& b) {
  return binary("prims.add", a, b, [](const Tensor& x, const Tensor& y) { return add(x, y, kOne); });
}

Tensor primsSub(const Tensor& a, const Tensor& b) {
  checkNotBool("prims.sub", a);
  return binary("prims.sub", a, b, [](const Tensor& x, const Tensor& y) { return sub(x, y, kOne); });
}

Tensor primsMul(const Tensor& a, const Tensor& b) { return binary("prims.mul", a, b, mul); }

// True division of floats; C's truncating division of integers (the result keeps the dtype).
Tensor primsDiv(const Tensor& a, const Tensor& b) {
  checkNotBool("prims.div", a);
  return binary("prims.div", a, b, [](const Tensor& x, const Tensor& y) {
    if (isFloatingType(x.dtype())) return div(x, y);
    return divMode(x, y, std::string("trunc"));
  });
}

Tensor primsRemainder(const Tensor& a, const Tensor& b) {
  checkNotBool("prims.remainder", a);
  return binary("prims.remainder", a, b, remainder);
}

Tensor primsFmod(const Tensor& a, const Tensor& b) {
  checkNotBool("prims.fmod", a);
  return binary("prims.fmod", a, b, fmod);
}

Tensor primsPow(const Tensor& a, const Tensor& b) {
  checkNotBool("prims.pow", a);
  return binary("prims.pow", a, b, pow);
}

Tensor primsMaximum(const Tensor& a, const Tensor& b) {
  return binary("prims.maximum", a, b, maximum);
}

Tensor primsMinimum(const Tensor& a, const Tensor& b) {
  return binary("prims.minimum", a, b, minimum);
}

Tensor primsAtan2(const Tensor& a, const Tensor& b) {
  checkFloating("prims.atan2", a);
  return binary("prims.atan2", a, b, atan2);
}

Tensor primsBitwiseAnd(const Tensor& a, const Tensor& b) {
  checkIntegral("prims.bitwise_and", a);
  return binary("prims.bitwise_and", a, b, bitwiseAnd);
}

Tensor primsBitwiseOr(const Tensor& a, const Tensor& b) {
  checkIntegral("prims.bitwise_or", a);
  return binary("prims.bitwise_or", a, b, bitwiseOr);
}

Tensor primsBitwiseXor(const Tensor& a, const Tensor& b) {
  checkIntegral("prims.bitwise_xor", a);
  return binary("prims.bitwise_xor", a, b, bitwiseXor);
}

Tensor primsEq(const Tensor& a, const Tensor& b) { return binary("prims.eq", a, b, eq); }
Tensor primsNe(const Tensor& a, const Tensor& b) { return binary("prims.ne", a, b, ne); }
Tensor primsLt(const Tensor& a, const Tensor& b) { return binary("prims.lt", a, b, lt); }
Tensor primsLe(const Tensor& a, const Tensor& b) { return binary("prims.le", a, b, le); }
Tensor primsGt(const Tensor& a, const Tensor& b) { return binary("prims.gt", a, b, gt); }
Tensor primsGe(const Tensor& a, const Tensor& b) { return binary("prims.ge", a, b, ge); }

Tensor primsWhere(const Tensor& pred, const Tensor& a, const Tensor& b) {
  KILN_CHECK(pred.dtype() == ScalarType::Bool, "prims.where: pred must be a bool tensor, got ",
             scalarTypeName(pred.dtype()));
  checkSameShapeDtypeDevice("prims.where", {&a, &b});
  KILN_CHECK(pred.sizes() == a.sizes(),
             "prims.where: operands must have equal shapes (prims do not broadcast), got ",
             pred.shapeString(), " and ", a.shapeString());
  return where(pred, a, b);
}

// -- conversion and movement ----------------------------------------------------------------

Tensor primsConvertElementType(const Tensor& a, ScalarType dtype) {
  return toCopy(a, dtype, std::nullopt);
}

Tensor primsDevicePut(const Tensor& a, Device device) { return toCopy(a, std::nullopt, device); }

Tensor primsCopyTo(const Tensor& a, const Tensor& b) {
  checkSameShapeDtypeDevice("prims.copy_to", {&a, &b});
  return copy_(a, b, false);
}

Tensor primsClone(const Tensor& a) { return clone(a); }

} // namespace kiln::kernels
