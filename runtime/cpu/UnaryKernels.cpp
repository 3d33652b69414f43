// Unary pointwise kernels: float math (integer and bool inputs compute in float32), the ops that
// keep the dtype (abs, neg, sign, rounding, nan_to_num), activations (relu, gelu, silu),
// predicates (isnan, isinf, isfinite) and logical/bitwise negation, with their in-place forms.
#include <cmath>
#include <cstdint>
#include <limits>
#include <tuple>

#include "generated/KernelDecls.h"
#include "runtime/cpu/KilnMath.h"
#include "runtime/cpu/Loops.h"
#include "runtime/cpu/PointwiseOps.h"

namespace kiln::kernels {

namespace {

// cpuKernel for one input and one output, whose contiguous runs are `omp simd` loops: GCC
// if-converts the selects of KilnMath.h's functions there (in cpuKernel's plain loop, exp, log
// and log1p stayed scalar: "control flow in loop").
template <typename F> void simdUnaryKernel(const TensorIterator& iter, const F& f) {
  using R = typename cpu::FunctionTraits<F>::Result;
  using A = std::tuple_element_t<0, typename cpu::FunctionTraits<F>::Args>;
  iter.forEach([&](char** data, const int64_t* strides, int64_t n) {
    if (strides[0] == int64_t(sizeof(R)) && strides[1] == int64_t(sizeof(A))) {
      R* __restrict out = reinterpret_cast<R*>(data[0]);
      const A* __restrict in = reinterpret_cast<const A*>(data[1]);
#pragma omp simd
      for (int64_t i = 0; i < n; ++i) out[i] = f(in[i]);
      return;
    }
    for (int64_t i = 0; i < n; ++i)
      *reinterpret_cast<R*>(data[0] + i * strides[0]) =
          f(*reinterpret_cast<const A*>(data[1] + i * strides[1]));
  });
}

// out = f(x) computed in opmath (float for 16-bit floats); integer inputs become float32 (the
// activations reject them instead and keep the dtype, which shows on meta tensors).
// `out` undefined: a new tensor; otherwise the op writes into it (the in-place path).
template <typename F>
Tensor floatUnary(const char* name, const Tensor& self, const Tensor& out, F f,
                  PromotionKind kind = PromotionKind::IntToFloat) {
  auto iter = TensorIterator::unary(name, self, kind, out);
  if (iter.isMeta()) return iter.output(); // shapes and dtypes only: no dtype dispatch
  KILN_DISPATCH_FLOATING(iter.computeDtype(), name, [&]<typename T>() {
    using M = opmath_t<T>;
    simdUnaryKernel(iter, [f](T x) -> T { return T(f(M(x))); });
  });
  return iter.output();
}

template <typename F> Tensor floatUnaryInplace(const char* name, const Tensor& self, F f) {
  ScalarType result = cpu::pointwiseResultType({self}, PromotionKind::IntToFloat);
  return cpu::runInplace(name, self, result, {},
                         [&](const Tensor& out) { return floatUnary(name, self, out, f); });
}

// out = f(x) in x's own dtype (opmath for 16-bit floats). `f` is a generic lambda and must
// compile for every dtype; callers reject the dtypes PyTorch rejects first.
template <typename F>
Tensor sameTypeUnary(const char* name, const Tensor& self, const Tensor& out, F f) {
  auto iter = TensorIterator::unary(name, self, PromotionKind::Default, out);
  if (iter.isMeta()) return iter.output();
  KILN_DISPATCH_ALL(iter.computeDtype(), name, [&]<typename T>() {
    if constexpr (cpu::isReducedFloat<T>)
      cpu::cpuKernel(iter, [f](T x) -> T { return T(f(float(x))); });
    else
      cpu::cpuKernel(iter, [f](T x) -> T { return T(f(x)); });
  });
  return iter.output();
}

template <typename F> Tensor sameTypeUnaryInplace(const char* name, const Tensor& self, F f) {
  return cpu::runInplace(name, self, self.dtype(), {},
                         [&](const Tensor& out) { return sameTypeUnary(name, self, out, f); });
}

// A bool result from any input dtype, computed in the input's dtype.
template <typename F>
Tensor predicate(const char* name, const Tensor& self, const Tensor& out, F f) {
  auto iter = TensorIterator::unary(name, self, PromotionKind::AlwaysBool, out);
  if (iter.isMeta()) return iter.output();
  KILN_DISPATCH_ALL(iter.computeDtype(), name, [&]<typename T>() {
    if constexpr (cpu::isReducedFloat<T>)
      cpu::cpuKernel(iter, [f](T x) -> bool { return f(float(x)); });
    else
      cpu::cpuKernel(iter, [f](T x) -> bool { return f(x); });
  });
  return iter.output();
}

// The transcendental ops go through KilnMath.h (the compiled code's functions, vectorizable;
// this file is compiled with -fno-trapping-math for that) in float and double alike; exp2, log2,
// log10, the trigonometric and hyperbolic functions and erf through glibc's libmvec.
namespace math = cpu::math;

// The float ops. Each takes and returns the opmath type.
constexpr auto expOp = [](auto x) { return math::exp(x); };
constexpr auto exp2Op = [](auto x) { return math::exp2(x); };
constexpr auto expm1Op = [](auto x) { return math::expm1(x); };
constexpr auto logOp = [](auto x) { return math::log(x); };
constexpr auto log2Op = [](auto x) { return math::log2(x); };
constexpr auto log10Op = [](auto x) { return math::log10(x); };
constexpr auto log1pOp = [](auto x) { return math::log1p(x); };
constexpr auto sqrtOp = [](auto x) { return std::sqrt(x); };
constexpr auto rsqrtOp = [](auto x) { return decltype(x)(1) / std::sqrt(x); };
constexpr auto sinOp = [](auto x) { return math::sin(x); };
constexpr auto cosOp = [](auto x) { return math::cos(x); };
constexpr auto tanOp = [](auto x) { return math::tan(x); };
constexpr auto asinOp = [](auto x) { return math::asin(x); };
constexpr auto acosOp = [](auto x) { return math::acos(x); };
constexpr auto atanOp = [](auto x) { return math::atan(x); };
constexpr auto sinhOp = [](auto x) { return math::sinh(x); };
constexpr auto coshOp = [](auto x) { return math::cosh(x); };
constexpr auto tanhOp = [](auto x) { return math::tanh(x); };
constexpr auto sigmoidOp = [](auto x) { return decltype(x)(1) / (decltype(x)(1) + math::exp(-x)); };
constexpr auto erfOp = [](auto x) { return math::erf(x); };

// erf's inverse as PyTorch computes it (ATen's calc_erfinv, in T): a rational guess in the
// central range or in sqrt(-log((1 - |y|) / 2)) in the tails, then two Newton steps on erf.
// NaN outside [-1, 1], +-inf at +-1. compiler/decompositions/PrimsPointwise.cpp follows it.
template <typename T> T erfinvOf(T y) {
  constexpr T a[4] = {T(0.886226899), T(-1.645349621), T(0.914624893), T(-0.140543331)};
  constexpr T b[4] = {T(-2.118377725), T(1.442710462), T(-0.329097515), T(0.012229801)};
  constexpr T c[4] = {T(-1.970840454), T(-1.624906493), T(3.429567803), T(1.641345311)};
  constexpr T d[2] = {T(3.543889200), T(1.637067800)};
  T yAbs = std::abs(y);
  if (yAbs > T(1)) return std::numeric_limits<T>::quiet_NaN();
  if (yAbs == T(1)) return std::copysign(std::numeric_limits<T>::infinity(), y);
  T x;
  if (yAbs <= T(0.7)) {
    T z = y * y;
    T num = ((a[3] * z + a[2]) * z + a[1]) * z + a[0];
    T dem = (((b[3] * z + b[2]) * z + b[1]) * z + b[0]) * z + T(1);
    x = y * num / dem;
  } else {
    T z = std::sqrt(-std::log((T(1) - yAbs) / T(2)));
    T num = ((c[3] * z + c[2]) * z + c[1]) * z + c[0];
    T dem = (d[1] * z + d[0]) * z + T(1);
    x = std::copysign(num, y) / dem;
  }
  constexpr T twoOverSqrtPi = T(1.12837916709551257390);
  x = x - (std::erf(x) - y) / (twoOverSqrtPi * std::exp(-x * x));
  x = x - (std::erf(x) - y) / (twoOverSqrtPi * std::exp(-x * x));
  return x;
}
constexpr auto erfinvOp = [](auto y) { return erfinvOf(y); };
constexpr auto reciprocalOp = [](auto x) { return decltype(x)(1) / x; };
constexpr auto siluOp = [](auto x) { return x / (decltype(x)(1) + math::exp(-x)); };

// PyTorch's gelu: exact (erf) or the tanh approximation, in opmath. The order of the products
// is PyTorch's vectorized one (x * (1 + erf) first), which decides where huge inputs overflow.
constexpr auto geluOp = [](auto x) {
  using M = decltype(x);
  return (M(1) + math::erfGelu(x * M(M_SQRT1_2))) * x * M(0.5);
};
constexpr auto geluTanhOp = [](auto x) {
  using M = decltype(x);
  const M beta = M(M_SQRT2 * M_2_SQRTPI * 0.5);
  const M kappa = M(0.044715);
  M inner = beta * (x + kappa * x * x * x);
  return M(0.5) * x * (M(1) + math::tanh(inner));
};

// The dtype-keeping ops.
constexpr auto absOp = [](auto x) {
  using X = decltype(x);
  if constexpr (std::is_same_v<X, bool> || std::is_unsigned_v<X>)
    return x;
  else if constexpr (std::is_integral_v<X>)
    return x < 0 ? cpu::wrappingNeg(x) : x;
  else
    return std::abs(x);
};
constexpr auto negOp = [](auto x) {
  using X = decltype(x);
  if constexpr (std::is_same_v<X, bool>)
    return x; // rejected before dispatch
  else
    return cpu::wrappingNeg(x);
};
constexpr auto signOp = [](auto x) {
  using X = decltype(x);
  if constexpr (std::is_same_v<X, bool> || std::is_unsigned_v<X>)
    return X(x > X(0));
  else
    return X(int(X(0) < x) - int(x < X(0)));
};
constexpr auto identityOp = [](auto x) { return x; };
constexpr auto floorOp = [](auto x) {
  if constexpr (std::is_integral_v<decltype(x)>)
    return x;
  else
    return std::floor(x);
};
constexpr auto ceilOp = [](auto x) {
  if constexpr (std::is_integral_v<decltype(x)>)
    return x;
  else
    return std::ceil(x);
};
constexpr auto truncOp = [](auto x) {
  if constexpr (std::is_integral_v<decltype(x)>)
    return x;
  else
    return std::trunc(x);
};
// Half to even, as PyTorch (std::nearbyint under the default rounding mode).
constexpr auto roundOp = [](auto x) {
  if constexpr (std::is_integral_v<decltype(x)>)
    return x;
  else
    return std::nearbyint(x);
};
// relu keeps NaN (PyTorch's relu is clamp_min(x, 0)).
constexpr auto reluOp = [](auto x) {
  using X = decltype(x);
  if constexpr (std::is_same_v<X, bool>)
    return x; // rejected before dispatch
  else
    return !(x <= X(0)) ? x : X(0);
};
constexpr auto bitwiseNotOp = [](auto x) {
  using X = decltype(x);
  if constexpr (std::is_same_v<X, bool>)
    return !x;
  else if constexpr (std::is_integral_v<X>)
    return X(~x);
  else
    return x; // rejected before dispatch
};

void rejectBool(const char* kernel, const Tensor& self) {
  if (self.dtype() == ScalarType::Bool && !self.isMeta())
    cpu::throwNotImplemented(kernel, ScalarType::Bool);
}
void rejectNonFloat(const char* kernel, const Tensor& self) {
  if (!isFloatingType(self.dtype()) && !self.isMeta())
    cpu::throwNotImplemented(kernel, self.dtype());
}
void checkNegBool(const Tensor& self) {
  KILN_CHECK(self.dtype() != ScalarType::Bool,
             "Negation, the `-` operator, on a bool tensor is not supported. If you are trying to "
             "invert a mask, use the `~` or `logical_not()` operator instead.");
}
void checkReluBool(const Tensor& self) {
  KILN_CHECK(self.dtype() != ScalarType::Bool, "Boolean inputs not supported for relu");
}
void rejectFloatBitwise(const Tensor& self) {
  if (isFloatingType(self.dtype()) && !self.isMeta())
    cpu::throwNotImplemented("bitwise_not_cpu", self.dtype());
}

bool isTanhApproximation(const std::string& approximate) {
  KILN_CHECK(approximate == "none" || approximate == "tanh",
             "approximate argument must be either none or tanh.");
  return approximate == "tanh";
}

Tensor geluInto(const char* name, const Tensor& self, const std::string& approximate,
                const Tensor& out) {
  bool tanhApprox = isTanhApproximation(approximate);
  rejectNonFloat("GeluKernelImpl", self);
  return tanhApprox ? floatUnary(name, self, out, geluTanhOp, PromotionKind::Default)
                    : floatUnary(name, self, out, geluOp, PromotionKind::Default);
}

// round(x, decimals): scale by 10^|decimals|, round half to even, unscale, in opmath (so a
// 16-bit float does not overflow in the scaled intermediate).
Tensor roundDecimalsInto(const char* name, const Tensor& self, int64_t decimals,
                         const Tensor& out) {
  rejectNonFloat("round_cpu", self);
  auto iter = TensorIterator::unary(name, self, PromotionKind::Default, out);
  if (iter.isMeta()) return iter.output();
  bool negative = decimals < 0;
  double scale = std::pow(10.0, double(negative ? -decimals : decimals));
  KILN_DISPATCH_FLOATING(iter.computeDtype(), name, [&]<typename T>() {
    using M = opmath_t<T>;
    M ten = M(scale);
    if (negative)
      cpu::cpuKernel(iter, [ten](T x) -> T { return T(std::nearbyint(M(x) / ten) * ten); });
    else
      cpu::cpuKernel(iter, [ten](T x) -> T { return T(std::nearbyint(M(x) * ten) / ten); });
  });
  return iter.output();
}

Tensor nanToNumInto(const char* name, const Tensor& self, std::optional<double> nan,
                    std::optional<double> posinf, std::optional<double> neginf, const Tensor& out) {
  if (!isFloatingType(self.dtype())) return sameTypeUnary(name, self, out, identityOp);
  auto iter = TensorIterator::unary(name, self, PromotionKind::Default, out);
  if (iter.isMeta()) return iter.output();
  KILN_DISPATCH_FLOATING(iter.computeDtype(), name, [&]<typename T>() {
    using M = opmath_t<T>;
    M maxValue;
    if constexpr (std::is_same_v<T, Half>)
      maxValue = 65504.0f;
    else if constexpr (std::is_same_v<T, BFloat16>)
      maxValue = 3.3895313892515355e38f;
    else
      maxValue = std::numeric_limits<T>::max();
    M nanValue = M(T(M(nan.value_or(0.0))));
    M posValue = posinf ? M(T(M(*posinf))) : maxValue;
    M negValue = neginf ? M(T(M(*neginf))) : -maxValue;
    cpu::cpuKernel(iter, [=](T a) -> T {
      M x = M(a);
      if (x != x) return T(nanValue);
      if (x == std::numeric_limits<M>::infinity()) return T(posValue);
      if (x == -std::numeric_limits<M>::infinity()) return T(negValue);
      return a;
    });
  });
  return iter.output();
}

} // namespace

// Float math.
Tensor exp(const Tensor& self) { return floatUnary("exp", self, {}, expOp); }
Tensor exp_(const Tensor& self) { return floatUnaryInplace("exp_", self, expOp); }
Tensor exp2(const Tensor& self) { return floatUnary("exp2", self, {}, exp2Op); }
Tensor exp2_(const Tensor& self) { return floatUnaryInplace("exp2_", self, exp2Op); }
Tensor expm1(const Tensor& self) { return floatUnary("expm1", self, {}, expm1Op); }
Tensor expm1_(const Tensor& self) { return floatUnaryInplace("expm1_", self, expm1Op); }
Tensor log(const Tensor& self) { return floatUnary("log", self, {}, logOp); }
Tensor log_(const Tensor& self) { return floatUnaryInplace("log_", self, logOp); }
Tensor log2(const Tensor& self) { return floatUnary("log2", self, {}, log2Op); }
Tensor log2_(const Tensor& self) { return floatUnaryInplace("log2_", self, log2Op); }
Tensor log10(const Tensor& self) { return floatUnary("log10", self, {}, log10Op); }
Tensor log10_(const Tensor& self) { return floatUnaryInplace("log10_", self, log10Op); }
Tensor log1p(const Tensor& self) { return floatUnary("log1p", self, {}, log1pOp); }
Tensor log1p_(const Tensor& self) { return floatUnaryInplace("log1p_", self, log1pOp); }
Tensor sqrt(const Tensor& self) { return floatUnary("sqrt", self, {}, sqrtOp); }
Tensor sqrt_(const Tensor& self) { return floatUnaryInplace("sqrt_", self, sqrtOp); }
Tensor rsqrt(const Tensor& self) { return floatUnary("rsqrt", self, {}, rsqrtOp); }
Tensor rsqrt_(const Tensor& self) { return floatUnaryInplace("rsqrt_", self, rsqrtOp); }
Tensor sin(const Tensor& self) { return floatUnary("sin", self, {}, sinOp); }
Tensor sin_(const Tensor& self) { return floatUnaryInplace("sin_", self, sinOp); }
Tensor cos(const Tensor& self) { return floatUnary("cos", self, {}, cosOp); }
Tensor cos_(const Tensor& self) { return floatUnaryInplace("cos_", self, cosOp); }
Tensor tan(const Tensor& self) { return floatUnary("tan", self, {}, tanOp); }
Tensor tan_(const Tensor& self) { return floatUnaryInplace("tan_", self, tanOp); }
Tensor asin(const Tensor& self) { return floatUnary("asin", self, {}, asinOp); }
Tensor asin_(const Tensor& self) { return floatUnaryInplace("asin_", self, asinOp); }
Tensor acos(const Tensor& self) { return floatUnary("acos", self, {}, acosOp); }
Tensor acos_(const Tensor& self) { return floatUnaryInplace("acos_", self, acosOp); }
Tensor atan(const Tensor& self) { return floatUnary("atan", self, {}, atanOp); }
Tensor atan_(const Tensor& self) { return floatUnaryInplace("atan_", self, atanOp); }
Tensor sinh(const Tensor& self) { return floatUnary("sinh", self, {}, sinhOp); }
Tensor sinh_(const Tensor& self) { return floatUnaryInplace("sinh_", self, sinhOp); }
Tensor cosh(const Tensor& self) { return floatUnary("cosh", self, {}, coshOp); }
Tensor cosh_(const Tensor& self) { return floatUnaryInplace("cosh_", self, coshOp); }
Tensor tanh(const Tensor& self) { return floatUnary("tanh", self, {}, tanhOp); }
Tensor tanh_(const Tensor& self) { return floatUnaryInplace("tanh_", self, tanhOp); }
Tensor sigmoid(const Tensor& self) { return floatUnary("sigmoid", self, {}, sigmoidOp); }
Tensor sigmoid_(const Tensor& self) { return floatUnaryInplace("sigmoid_", self, sigmoidOp); }
Tensor erf(const Tensor& self) { return floatUnary("erf", self, {}, erfOp); }
Tensor erf_(const Tensor& self) { return floatUnaryInplace("erf_", self, erfOp); }
Tensor erfinv(const Tensor& self) { return floatUnary("erfinv", self, {}, erfinvOp); }
Tensor erfinv_(const Tensor& self) { return floatUnaryInplace("erfinv_", self, erfinvOp); }
Tensor reciprocal(const Tensor& self) { return floatUnary("reciprocal", self, {}, reciprocalOp); }
Tensor reciprocal_(const Tensor& self) {
  return floatUnaryInplace("reciprocal_", self, reciprocalOp);
}

// Activations (floating dtypes only, except relu).
Tensor relu(const Tensor& self) {
  checkReluBool(self);
  return sameTypeUnary("relu", self, {}, reluOp);
}
Tensor relu_(const Tensor& self) {
  checkReluBool(self);
  return sameTypeUnaryInplace("relu_", self, reluOp);
}
Tensor gelu(const Tensor& self, const std::string& approximate) {
  return geluInto("gelu", self, approximate, {});
}
Tensor gelu_(const Tensor& self, const std::string& approximate) {
  isTanhApproximation(approximate);
  rejectNonFloat("GeluKernelImpl", self);
  return cpu::runInplace("gelu_", self, self.dtype(), {}, [&](const Tensor& out) {
    return geluInto("gelu_", self, approximate, out);
  });
}
Tensor silu(const Tensor& self) {
  rejectNonFloat("silu", self);
  return floatUnary("silu", self, {}, siluOp, PromotionKind::Default);
}
Tensor silu_(const Tensor& self) {
  rejectNonFloat("silu", self);
  return cpu::runInplace("silu_", self, self.dtype(), {}, [&](const Tensor& out) {
    return floatUnary("silu_", self, out, siluOp, PromotionKind::Default);
  });
}

// Dtype-keeping ops.
Tensor abs(const Tensor& self) {
  rejectBool("abs_cpu", self);
  return sameTypeUnary("abs", self, {}, absOp);
}
Tensor abs_(const Tensor& self) {
  rejectBool("abs_cpu", self);
  return sameTypeUnaryInplace("abs_", self, absOp);
}
Tensor neg(const Tensor& self) {
  checkNegBool(self);
  return sameTypeUnary("neg", self, {}, negOp);
}
Tensor neg_(const Tensor& self) {
  checkNegBool(self);
  return sameTypeUnaryInplace("neg_", self, negOp);
}
Tensor positive(const Tensor& self) {
  KILN_CHECK(self.dtype() != ScalarType::Bool,
             "The `+` operator, on a bool tensor is not supported.");
  return self;
}
Tensor sign(const Tensor& self) { return sameTypeUnary("sign", self, {}, signOp); }
Tensor sign_(const Tensor& self) { return sameTypeUnaryInplace("sign_", self, signOp); }
Tensor floor(const Tensor& self) {
  rejectBool("floor", self);
  return sameTypeUnary("floor", self, {}, floorOp);
}
Tensor floor_(const Tensor& self) {
  rejectBool("floor", self);
  return sameTypeUnaryInplace("floor_", self, floorOp);
}
Tensor ceil(const Tensor& self) {
  rejectBool("ceil", self);
  return sameTypeUnary("ceil", self, {}, ceilOp);
}
Tensor ceil_(const Tensor& self) {
  rejectBool("ceil", self);
  return sameTypeUnaryInplace("ceil_", self, ceilOp);
}
Tensor trunc(const Tensor& self) {
  rejectBool("trunc", self);
  return sameTypeUnary("trunc", self, {}, truncOp);
}
Tensor trunc_(const Tensor& self) {
  rejectBool("trunc", self);
  return sameTypeUnaryInplace("trunc_", self, truncOp);
}
Tensor round(const Tensor& self) {
  rejectBool("round", self);
  return sameTypeUnary("round", self, {}, roundOp);
}
Tensor round_(const Tensor& self) {
  rejectBool("round", self);
  return sameTypeUnaryInplace("round_", self, roundOp);
}
Tensor roundDecimals(const Tensor& self, int64_t decimals) {
  return roundDecimalsInto("round", self, decimals, {});
}
Tensor roundDecimals_(const Tensor& self, int64_t decimals) {
  rejectNonFloat("round_cpu", self);
  return cpu::runInplace("round_", self, self.dtype(), {}, [&](const Tensor& out) {
    return roundDecimalsInto("round_", self, decimals, out);
  });
}
Tensor square(const Tensor& self) { return powTensorScalar(self, Scalar(int64_t(2))); }
Tensor square_(const Tensor& self) { return powTensorScalar_(self, Scalar(int64_t(2))); }
Tensor nanToNum(const Tensor& self, std::optional<double> nan, std::optional<double> posinf,
                std::optional<double> neginf) {
  return nanToNumInto("nan_to_num", self, nan, posinf, neginf, {});
}
Tensor nanToNum_(const Tensor& self, std::optional<double> nan, std::optional<double> posinf,
                 std::optional<double> neginf) {
  return cpu::runInplace("nan_to_num_", self, self.dtype(), {}, [&](const Tensor& out) {
    return nanToNumInto("nan_to_num_", self, nan, posinf, neginf, out);
  });
}

// Predicates and negations with bool results.
Tensor isnan(const Tensor& self) {
  return predicate("isnan", self, {}, [](auto x) { return x != x; });
}
Tensor isinf(const Tensor& self) {
  return predicate("isinf", self, {}, [](auto x) {
    if constexpr (std::is_integral_v<decltype(x)>)
      return false;
    else
      return std::isinf(x);
  });
}
Tensor isfinite(const Tensor& self) {
  return predicate("isfinite", self, {}, [](auto x) {
    if constexpr (std::is_integral_v<decltype(x)>)
      return true;
    else
      return std::isfinite(x);
  });
}
Tensor logicalNot(const Tensor& self) {
  return predicate("logical_not", self, {}, [](auto x) { return !bool(x); });
}
Tensor logicalNot_(const Tensor& self) {
  return cpu::runInplace("logical_not_", self, ScalarType::Bool, {}, [&](const Tensor& out) {
    return predicate("logical_not_", self, out, [](auto x) { return !bool(x); });
  });
}
Tensor bitwiseNot(const Tensor& self) {
  rejectFloatBitwise(self);
  return sameTypeUnary("bitwise_not", self, {}, bitwiseNotOp);
}
Tensor bitwiseNot_(const Tensor& self) {
  rejectFloatBitwise(self);
  return sameTypeUnaryInplace("bitwise_not_", self, bitwiseNotOp);
}

} // namespace kiln::kernels
