// Core ATen -> Prims: pointwise ops (arithmetic, unary math, comparisons, logical and bitwise
// ops, where, clamp, relu, gelu), after torch/_refs: operands promoted to the compute dtype
// with convert_element_type, broadcast with broadcast_in_dim, the prim applied, the result
// converted to PyTorch's result dtype.
#include <cmath>
#include <numbers>

#include "compiler/decompositions/PrimsCommon.h"
#include "runtime/Half.h"
#include "generated/DecompositionDecls.h"

namespace kiln::decompositions {

namespace P = kiln::ops::prims;

namespace {

using Ts = std::vector<Tensor>;

bool isOne(const Scalar& s) { return s.toDouble() == 1.0 && !s.isBool(); }

// self + alpha * other (sub: self - alpha * other), in the compute dtype. The op itself has
// rejected the alphas PyTorch rejects (the recorder runs it on fakes first).
// A 16-bit float result rounds alpha to its type first, as the eager kernel (and PyTorch's)
// does: add_(g, alpha=-0.1) on bfloat16 multiplies by -0.10009765625.
Tensor addLike(const char* op, const Operand& self, const Operand& other, const Scalar& alpha,
               bool subtract) {
  Scalar a = alpha;
  if (!isOne(alpha) && !alpha.isBool()) {
    ScalarType result = elementwiseDtypes({self, other}, PromotionKind::Default).result;
    float f = static_cast<float>(alpha.toDouble());
    if (result == ScalarType::Float16) a = Scalar(static_cast<double>(float(Half(f))));
    if (result == ScalarType::BFloat16) a = Scalar(static_cast<double>(float(BFloat16(f))));
  }
  return pointwise(op, {self, other}, PromotionKind::Default, [&](const Ts& t) {
    Tensor b = t[1];
    if (!isOne(a)) b = P::mul(b, filledLike(b, a));
    return subtract ? P::sub(t[0], b) : P::add(t[0], b);
  });
}

// Floor division of floats as PyTorch's kernel computes it (torch/_refs _floor_divide_float):
// from fmod, so that the quotient is exact where a plain floor(a / b) rounds wrongly.
Tensor floorDivideFloat(const Tensor& a, const Tensor& b) {
  Tensor zero = filledLike(a, 0), one = filledLike(a, 1);
  Tensor mod = P::fmod(a, b);
  Tensor div = P::div(P::sub(a, mod), b);
  Tensor differentSigns = P::bitwise_xor(P::lt(a, zero), P::lt(b, zero));
  Tensor mask = P::bitwise_and(P::ne(mod, zero), differentSigns);
  div = P::where(mask, P::sub(div, one), div);
  Tensor floorDiv = P::floor(div);
  floorDiv = P::where(P::gt(P::sub(div, floorDiv), filledLike(a, 0.5)), P::add(floorDiv, one),
                      floorDiv);
  Tensor basicDiv = P::div(a, b);
  // A zero quotient takes the sign of the true quotient (0 * q is copysign(0, q) for finite q).
  floorDiv = P::where(P::ne(div, zero), floorDiv, P::mul(zero, basicDiv));
  return P::where(P::ne(b, zero), floorDiv, basicDiv);
}

// Floor division of integers: truncation corrected where the signs differ and a remainder is
// left (torch/_refs _floor_divide_integer).
Tensor floorDivideInteger(const Tensor& a, const Tensor& b) {
  Tensor truncated = P::div(a, b);
  if (!isSignedType(a.dtype())) return truncated;
  Tensor zero = filledLike(a, 0);
  Tensor differentSigns = P::ne(P::lt(a, zero), P::lt(b, zero));
  Tensor offset = P::bitwise_and(differentSigns, P::ne(P::fmod(a, b), zero));
  return P::sub(truncated, convert(offset, a.dtype()));
}

Tensor divideWithMode(const char* op, const Operand& self, const Operand& other,
                      const std::optional<std::string>& mode) {
  if (!mode) {
    return pointwise(op, {self, other}, PromotionKind::IntToFloat,
                     [](const Ts& t) { return P::div(t[0], t[1]); });
  }
  KILN_CHECK(*mode == "trunc" || *mode == "floor",
             "div expected rounding_mode to be one of None, 'trunc', or 'floor' but found '",
             *mode, "'");
  bool trunc = *mode == "trunc";
  return pointwise(op, {self, other}, PromotionKind::Default, [&](const Ts& t) {
    if (isFloatingType(t[0].dtype()))
      return trunc ? P::trunc(P::div(t[0], t[1])) : floorDivideFloat(t[0], t[1]);
    KILN_CHECK(t[0].dtype() != ScalarType::Bool, "\"div_", *mode,
               "_cpu\" not implemented for 'Bool'");
    return trunc ? P::div(t[0], t[1]) : floorDivideInteger(t[0], t[1]);
  });
}

template <typename Prim> Tensor unaryFloat(const char* op, const Tensor& self, Prim prim) {
  return pointwise(op, {self}, PromotionKind::IntToFloat,
                   [&](const Ts& t) { return prim(t[0]); });
}

// abs/neg-like ops of the input's dtype.
template <typename Prim> Tensor unarySame(const char* op, const Tensor& self, Prim prim) {
  return pointwise(op, {self}, PromotionKind::Default, [&](const Ts& t) { return prim(t[0]); });
}

// floor/ceil/round/trunc: integers are already integral (a copy, as torch/_refs does).
template <typename Prim> Tensor rounding(const char* op, const Tensor& self, Prim prim) {
  return unarySame(op, self, [&](const Tensor& x) {
    return isFloatingType(x.dtype()) ? prim(x) : P::clone(x);
  });
}

template <typename Prim>
Tensor binary(const char* op, const Operand& a, const Operand& b, PromotionKind kind, Prim prim) {
  return pointwise(op, {a, b}, kind, [&](const Ts& t) { return prim(t[0], t[1]); });
}

Tensor compare(const char* op, const Operand& a, const Operand& b,
               Tensor (*prim)(const Tensor&, const Tensor&)) {
  return binary(op, a, b, PromotionKind::AlwaysBool, prim);
}

// A tensor as bool (nonzero).
Tensor truthy(const Tensor& t) {
  return t.dtype() == ScalarType::Bool ? t : P::ne(t, filledLike(t, 0));
}

// Each operand becomes bool on its own (nonzero): no common dtype is involved.
Tensor logical(const char* op, const Operand& a, const Operand& b,
               Tensor (*prim)(const Tensor&, const Tensor&)) {
  DimVector shape = broadcastShape(op, {a, b});
  Device device = deviceOf({a, b});
  auto asBool = [&](const Operand& o) {
    if (o.isNumber()) return filled(o.number.toBool(), ScalarType::Bool, device, shape);
    return broadcastTo(truthy(*o.tensor), shape);
  };
  return prim(asBool(a), asBool(b));
}

Tensor bitwise(const char* op, const Operand& a, const Operand& b,
               Tensor (*prim)(const Tensor&, const Tensor&)) {
  return binary(op, a, b, PromotionKind::Default, [&](const Tensor& x, const Tensor& y) {
    KILN_CHECK(isIntegralType(x.dtype(), true), "\"", op, "_cpu\" not implemented for '",
               scalarTypeShortName(x.dtype()), "'");
    return prim(x, y);
  });
}

// clamp after torch/_refs: NaN inputs stay NaN, a NaN bound gives NaN.
Tensor clampImpl(const char* op, const Tensor& self, const std::optional<Operand>& lo,
                 const std::optional<Operand>& hi) {
  KILN_CHECK(lo || hi, "torch.clamp: At least one of 'min' or 'max' must not be None");
  std::vector<Operand> operands{self};
  if (lo) operands.push_back(*lo);
  if (hi) operands.push_back(*hi);
  return pointwise(op, operands, PromotionKind::Default, [&](const Ts& t) {
    Tensor a = t[0];
    Tensor isNan = P::ne(a, a);
    size_t next = 1;
    if (lo) {
      const Tensor& bound = t[next++];
      a = P::where(P::bitwise_or(P::ge(a, bound), isNan), a, bound);
    }
    if (hi) {
      const Tensor& bound = t[next++];
      a = P::where(P::bitwise_or(P::le(a, bound), isNan), a, bound);
    }
    return a;
  });
}

} // namespace

// -- arithmetic -----------------------------------------------------------------------------

Tensor add(const Tensor& self, const Tensor& other, const Scalar& alpha) {
  return addLike("add", self, other, alpha, false);
}
Tensor addScalar(const Tensor& self, const Scalar& other, const Scalar& alpha) {
  return addLike("add", self, other, alpha, false);
}
Tensor sub(const Tensor& self, const Tensor& other, const Scalar& alpha) {
  return addLike("sub", self, other, alpha, true);
}
Tensor subScalar(const Tensor& self, const Scalar& other, const Scalar& alpha) {
  return addLike("sub", self, other, alpha, true);
}
Tensor mul(const Tensor& self, const Tensor& other) {
  return binary("mul", self, other, PromotionKind::Default, P::mul);
}
Tensor mulScalar(const Tensor& self, const Scalar& other) {
  return binary("mul", self, other, PromotionKind::Default, P::mul);
}
Tensor div(const Tensor& self, const Tensor& other) {
  return divideWithMode("div", self, other, std::nullopt);
}
Tensor divMode(const Tensor& self, const Tensor& other, const std::optional<std::string>& mode) {
  return divideWithMode("div", self, other, mode);
}
Tensor divScalar(const Tensor& self, const Scalar& other) {
  return divideWithMode("div", self, other, std::nullopt);
}
Tensor divScalarMode(const Tensor& self, const Scalar& other,
                     const std::optional<std::string>& mode) {
  return divideWithMode("div", self, other, mode);
}
Tensor remainder(const Tensor& self, const Tensor& other) {
  return binary("remainder", self, other, PromotionKind::Default, P::remainder);
}
Tensor remainderScalar(const Tensor& self, const Scalar& other) {
  return binary("remainder", self, other, PromotionKind::Default, P::remainder);
}
Tensor fmod(const Tensor& self, const Tensor& other) {
  return binary("fmod", self, other, PromotionKind::Default, P::fmod);
}
Tensor fmodScalar(const Tensor& self, const Scalar& other) {
  return binary("fmod", self, other, PromotionKind::Default, P::fmod);
}
Tensor pow(const Tensor& self, const Tensor& exponent) {
  return binary("pow", self, exponent, PromotionKind::Default, P::pow);
}
Tensor powScalarTensor(const Scalar& self, const Tensor& exponent) {
  return binary("pow", self, exponent, PromotionKind::Default, P::pow);
}
Tensor powTensorScalar(const Tensor& self, const Scalar& exponent) {
  return binary("pow", self, exponent, PromotionKind::Default, P::pow);
}
Tensor maximum(const Tensor& self, const Tensor& other) {
  return binary("maximum", self, other, PromotionKind::Default, P::maximum);
}
Tensor minimum(const Tensor& self, const Tensor& other) {
  return binary("minimum", self, other, PromotionKind::Default, P::minimum);
}
Tensor atan2(const Tensor& self, const Tensor& other) {
  return binary("atan2", self, other, PromotionKind::IntToFloat, P::atan2);
}

// -- unary math -----------------------------------------------------------------------------

Tensor exp(const Tensor& self) { return unaryFloat("exp", self, P::exp); }
Tensor expm1(const Tensor& self) { return unaryFloat("expm1", self, P::expm1); }
Tensor log(const Tensor& self) { return unaryFloat("log", self, P::log); }
Tensor log2(const Tensor& self) { return unaryFloat("log2", self, P::log2); }
Tensor log10(const Tensor& self) { return unaryFloat("log10", self, P::log10); }
Tensor log1p(const Tensor& self) { return unaryFloat("log1p", self, P::log1p); }
Tensor sqrt(const Tensor& self) { return unaryFloat("sqrt", self, P::sqrt); }
Tensor rsqrt(const Tensor& self) { return unaryFloat("rsqrt", self, P::rsqrt); }
Tensor sin(const Tensor& self) { return unaryFloat("sin", self, P::sin); }
Tensor cos(const Tensor& self) { return unaryFloat("cos", self, P::cos); }
Tensor tan(const Tensor& self) { return unaryFloat("tan", self, P::tan); }
Tensor asin(const Tensor& self) { return unaryFloat("asin", self, P::asin); }
Tensor acos(const Tensor& self) { return unaryFloat("acos", self, P::acos); }
Tensor atan(const Tensor& self) { return unaryFloat("atan", self, P::atan); }
Tensor sinh(const Tensor& self) { return unaryFloat("sinh", self, P::sinh); }
Tensor cosh(const Tensor& self) { return unaryFloat("cosh", self, P::cosh); }
Tensor tanh(const Tensor& self) { return unaryFloat("tanh", self, P::tanh); }
Tensor erf(const Tensor& self) { return unaryFloat("erf", self, P::erf); }

Tensor reciprocal(const Tensor& self) { return unaryFloat("reciprocal", self, P::reciprocal); }

// 1 / (1 + exp(-x)), as torch/_refs writes sigmoid.
Tensor sigmoid(const Tensor& self) {
  return unaryFloat("sigmoid", self, [](const Tensor& x) {
    Tensor one = filledLike(x, 1);
    return P::div(one, P::add(one, P::exp(P::neg(x))));
  });
}

Tensor abs(const Tensor& self) {
  return unarySame("abs", self, [](const Tensor& x) {
    return x.dtype() == ScalarType::Bool ? P::clone(x) : P::abs(x);
  });
}

Tensor neg(const Tensor& self) {
  KILN_CHECK(self.dtype() != ScalarType::Bool,
             "Negation, the `-` operator, on a bool tensor is not supported. If you are trying "
             "to invert a mask, use the `~` or `logical_not()` operator instead.");
  return unarySame("neg", self, P::neg);
}

Tensor sign(const Tensor& self) {
  return unarySame("sign", self, [](const Tensor& x) {
    return x.dtype() == ScalarType::Bool ? P::clone(x) : P::sign(x);
  });
}

Tensor floor(const Tensor& self) { return rounding("floor", self, P::floor); }
Tensor ceil(const Tensor& self) { return rounding("ceil", self, P::ceil); }
Tensor trunc(const Tensor& self) { return rounding("trunc", self, P::trunc); }
Tensor round(const Tensor& self) { return rounding("round", self, P::round); }

// where(x <= 0, 0, x): NaN stays NaN (torch/_refs relu).
Tensor relu(const Tensor& self) {
  return unarySame("relu", self, [](const Tensor& x) {
    Tensor zero = filledLike(x, 0);
    return P::where(P::le(x, zero), zero, x);
  });
}

// 0.5 x (1 + erf(x / sqrt 2)); "tanh": 0.5 x (1 + tanh(sqrt(2 / pi) (x + 0.044715 x^3))).
Tensor gelu(const Tensor& self, const std::string& approximate) {
  KILN_CHECK(approximate == "none" || approximate == "tanh",
             "approximate argument must be either none or tanh.");
  KILN_CHECK(isFloatingType(self.dtype()), "\"GeluKernelImpl\" not implemented for '",
             scalarTypeShortName(self.dtype()), "'");
  return unarySame("gelu", self, [&](const Tensor& x) {
    Tensor half = filledLike(x, 0.5), one = filledLike(x, 1);
    Tensor inner;
    if (approximate == "tanh") {
      Tensor cube = P::mul(P::mul(x, x), x);
      Tensor arg = P::mul(filledLike(x, std::sqrt(2.0 / std::numbers::pi)),
                          P::add(x, P::mul(filledLike(x, 0.044715), cube)));
      inner = P::tanh(arg);
    } else {
      inner = P::erf(P::mul(x, filledLike(x, 1.0 / std::numbers::sqrt2)));
    }
    return P::mul(P::mul(half, x), P::add(one, inner));
  });
}

// -- bool-valued tests ----------------------------------------------------------------------

Tensor isnan(const Tensor& self) { return P::ne(self, self); }

Tensor isinf(const Tensor& self) {
  if (!isFloatingType(self.dtype())) return filled(false, ScalarType::Bool, self.device(), self.sizes());
  return P::eq(P::abs(self), filledLike(self, INFINITY));
}

Tensor logicalNot(const Tensor& self) {
  return self.dtype() == ScalarType::Bool ? P::bitwise_not(self)
                                          : P::eq(self, filledLike(self, 0));
}

Tensor bitwiseNot(const Tensor& self) {
  KILN_CHECK(isIntegralType(self.dtype(), true), "\"bitwise_not_cpu\" not implemented for '",
             scalarTypeShortName(self.dtype()), "'");
  return P::bitwise_not(self);
}

// -- comparisons ----------------------------------------------------------------------------

Tensor eq(const Tensor& self, const Tensor& other) { return compare("eq", self, other, P::eq); }
Tensor eqScalar(const Tensor& self, const Scalar& other) { return compare("eq", self, other, P::eq); }
Tensor ne(const Tensor& self, const Tensor& other) { return compare("ne", self, other, P::ne); }
Tensor neScalar(const Tensor& self, const Scalar& other) { return compare("ne", self, other, P::ne); }
Tensor lt(const Tensor& self, const Tensor& other) { return compare("lt", self, other, P::lt); }
Tensor ltScalar(const Tensor& self, const Scalar& other) { return compare("lt", self, other, P::lt); }
Tensor le(const Tensor& self, const Tensor& other) { return compare("le", self, other, P::le); }
Tensor leScalar(const Tensor& self, const Scalar& other) { return compare("le", self, other, P::le); }
Tensor gt(const Tensor& self, const Tensor& other) { return compare("gt", self, other, P::gt); }
Tensor gtScalar(const Tensor& self, const Scalar& other) { return compare("gt", self, other, P::gt); }
Tensor ge(const Tensor& self, const Tensor& other) { return compare("ge", self, other, P::ge); }
Tensor geScalar(const Tensor& self, const Scalar& other) { return compare("ge", self, other, P::ge); }

// -- logical and bitwise --------------------------------------------------------------------

Tensor logicalAnd(const Tensor& self, const Tensor& other) {
  return logical("logical_and", self, other, P::bitwise_and);
}
Tensor logicalOr(const Tensor& self, const Tensor& other) {
  return logical("logical_or", self, other, P::bitwise_or);
}
Tensor logicalXor(const Tensor& self, const Tensor& other) {
  return logical("logical_xor", self, other, P::bitwise_xor);
}
Tensor bitwiseAnd(const Tensor& self, const Tensor& other) {
  return bitwise("bitwise_and", self, other, P::bitwise_and);
}
Tensor bitwiseAndScalar(const Tensor& self, const Scalar& other) {
  return bitwise("bitwise_and", self, other, P::bitwise_and);
}
Tensor bitwiseOr(const Tensor& self, const Tensor& other) {
  return bitwise("bitwise_or", self, other, P::bitwise_or);
}
Tensor bitwiseOrScalar(const Tensor& self, const Scalar& other) {
  return bitwise("bitwise_or", self, other, P::bitwise_or);
}
Tensor bitwiseXor(const Tensor& self, const Tensor& other) {
  return bitwise("bitwise_xor", self, other, P::bitwise_xor);
}
Tensor bitwiseXorScalar(const Tensor& self, const Scalar& other) {
  return bitwise("bitwise_xor", self, other, P::bitwise_xor);
}

// -- selection ------------------------------------------------------------------------------

Tensor where(const Tensor& condition, const Tensor& self, const Tensor& other) {
  KILN_CHECK(condition.dtype() == ScalarType::Bool,
             "where expected condition to be a boolean tensor, but got a tensor with dtype ",
             scalarTypeShortName(condition.dtype()));
  DimVector shape = broadcastShape("where", {condition, self, other});
  Tensor pred = broadcastTo(condition, shape);
  return pointwise("where", {self, other}, PromotionKind::Default, [&](const Ts& t) {
    return P::where(pred, broadcastTo(t[0], shape), broadcastTo(t[1], shape));
  });
}

Tensor clamp(const Tensor& self, const std::optional<Scalar>& min, const std::optional<Scalar>& max) {
  std::optional<Operand> lo, hi;
  if (min) lo = Operand(*min);
  if (max) hi = Operand(*max);
  return clampImpl("clamp", self, lo, hi);
}

Tensor clampTensor(const Tensor& self, const std::optional<Tensor>& min,
                   const std::optional<Tensor>& max) {
  std::optional<Operand> lo, hi;
  if (min) lo = Operand(*min);
  if (max) hi = Operand(*max);
  return clampImpl("clamp", self, lo, hi);
}

} // namespace kiln::decompositions
