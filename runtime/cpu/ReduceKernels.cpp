// sum, mean, prod, all, any, logsumexp and the vector norm: reductions that fold values into an
// accumulator (float for the 16-bit floats, wrapping int64 for integers) and map it to a result.
#include <cstdint>
#include <cmath>
#include <limits>
#include <sstream>

#include "generated/KernelDecls.h"
#include "generated/Ops.h"
#include "runtime/Reduction.h"
#include "runtime/cpu/ReduceLoops.h"

namespace kiln::kernels {

namespace {

// An explicit dtype= casts the input before reducing, as in PyTorch.
Tensor castTo(const Tensor& self, std::optional<ScalarType> dtype) {
  return dtype && *dtype != self.dtype() ? ops::to(self, *dtype) : self;
}

// Integers accumulate in uint64 so overflow wraps (as PyTorch's int64 does) without UB; bool
// results (dtype=torch.bool) saturate.
template <typename Out> using AccumulatorOf =
    std::conditional_t<std::is_same_v<Out, bool>, bool,
                       std::conditional_t<std::is_integral_v<Out>, uint64_t, opmath_t<Out>>>;

template <typename In, typename Out> struct SumOp {
  using acc_t = AccumulatorOf<Out>;
  acc_t identity() const { return acc_t(0); }
  acc_t step(acc_t a, opmath_t<In> x, int64_t) const {
    if constexpr (std::is_same_v<acc_t, bool>) return a | bool(x);
    else return a + acc_t(x);
  }
  acc_t combine(acc_t a, acc_t b) const {
    if constexpr (std::is_same_v<acc_t, bool>) return a | b;
    else return a + b;
  }
  void write(char* const* out, acc_t a) const { *reinterpret_cast<Out*>(out[0]) = Out(a); }
};

template <typename T> struct MeanOp : SumOp<T, T> {
  using acc_t = opmath_t<T>;
  acc_t count;
  explicit MeanOp(int64_t n) : count(acc_t(n)) {}
  void write(char* const* out, acc_t a) const { *reinterpret_cast<T*>(out[0]) = T(a / count); }
};

template <typename In, typename Out> struct ProdOp {
  using acc_t = AccumulatorOf<Out>;
  acc_t identity() const { return acc_t(1); }
  acc_t step(acc_t a, opmath_t<In> x, int64_t) const {
    if constexpr (std::is_same_v<acc_t, bool>) return a & bool(x);
    else return a * acc_t(x);
  }
  acc_t combine(acc_t a, acc_t b) const {
    if constexpr (std::is_same_v<acc_t, bool>) return a & b;
    else return a * b;
  }
  void write(char* const* out, acc_t a) const { *reinterpret_cast<Out*>(out[0]) = Out(a); }
};

// all (kAll) / any: result bool, or uint8 for uint8 input.
template <typename T, typename Out, bool kAll> struct LogicalOp {
  using acc_t = bool;
  acc_t identity() const { return kAll; }
  acc_t step(acc_t a, opmath_t<T> x, int64_t) const {
    bool nonzero = x != opmath_t<T>(0);
    return kAll ? (a & nonzero) : (a | nonzero);
  }
  acc_t combine(acc_t a, acc_t b) const { return kAll ? (a & b) : (a | b); }
  void write(char* const* out, acc_t a) const { *reinterpret_cast<Out*>(out[0]) = Out(a); }
};

// log(sum(exp(x))) in one pass: the running maximum m and sum(exp(x - m)), rescaled when m
// grows. Equal maxima (also infinite ones) add without subtracting, so inf - inf never occurs.
template <typename T> struct LogSumExpOp {
  using M = opmath_t<T>;
  struct acc_t {
    M max;
    M sum;
  };
  acc_t identity() const { return {-std::numeric_limits<M>::infinity(), M(0)}; }
  acc_t step(acc_t a, M x, int64_t) const { return combine(a, acc_t{x, M(1)}); }
  acc_t combine(acc_t a, acc_t b) const {
    if (b.max > a.max) std::swap(a, b);
    if (b.max == a.max) return {a.max, a.sum + b.sum};
    return {a.max, a.sum + b.sum * cpu::expOpmath(b.max - a.max)};
  }
  void write(char* const* out, acc_t a) const {
    *reinterpret_cast<T*>(out[0]) = T(a.max + std::log(a.sum));
  }
};

enum class NormKind { Zero, One, Two, Inf, NegInf, General };

// sum(|x|^p)^(1/p) and its special cases.
template <typename T, NormKind kKind> struct NormOp {
  using acc_t = opmath_t<T>;
  acc_t p;
  acc_t identity() const {
    return kKind == NormKind::NegInf ? std::numeric_limits<acc_t>::infinity() : acc_t(0);
  }
  acc_t step(acc_t a, acc_t v, int64_t) const {
    if constexpr (kKind == NormKind::Zero) return a + acc_t(v != acc_t(0));
    else if constexpr (kKind == NormKind::One) return a + std::abs(v);
    else if constexpr (kKind == NormKind::Two) return a + v * v;
    else if constexpr (kKind == NormKind::General) return a + std::pow(std::abs(v), p);
    else return combine(a, std::abs(v));
  }
  acc_t combine(acc_t a, acc_t b) const {
    if constexpr (kKind == NormKind::Inf) return (b > a || std::isnan(b)) ? b : a;
    else if constexpr (kKind == NormKind::NegInf) return (b < a || std::isnan(b)) ? b : a;
    else return a + b;
  }
  void write(char* const* out, acc_t a) const {
    acc_t r = a;
    if constexpr (kKind == NormKind::Two) r = std::sqrt(a);
    else if constexpr (kKind == NormKind::General) r = std::pow(a, acc_t(1) / p);
    *reinterpret_cast<T*>(out[0]) = T(r);
  }
};

// A new `outType` result of reducing `in` over `mask`: makeOp<scalar_t>(plan) runs the kernel
// for in's dtype (kAllTypes: any dtype, else the floating ones).
template <bool kAllTypes, typename MakeOp>
Tensor runReduction(const char* name, const Tensor& in, DimMask mask, bool keepdim,
                    ScalarType outType, const MakeOp& makeOp) {
  Tensor out = emptyReduction(in, mask, keepdim, outType);
  if (in.isMeta()) return out;
  ReductionPlan plan = planReduction(in, mask, {out});
  auto run = [&]<typename scalar_t>() { makeOp.template operator()<scalar_t>(plan); };
  if constexpr (kAllTypes) KILN_DISPATCH_ALL(in.dtype(), name, run);
  else KILN_DISPATCH_FLOATING(in.dtype(), name, run);
  return out;
}

ScalarType sumResultType(const Tensor& self, std::optional<ScalarType> dtype) {
  if (dtype) return *dtype;
  return isIntegralType(self.dtype(), true) ? ScalarType::Int64 : self.dtype();
}

// sum and prod share their dtype rules: integers and bool give int64 unless dtype= says.
template <template <typename, typename> class Op>
Tensor sumLike(const char* name, const Tensor& self, std::optional<IntArrayRef> dim, bool keepdim,
               std::optional<ScalarType> dtype) {
  DimMask mask = makeDimMask(dim, self.dim());
  Tensor in = castTo(self, dtype);
  ScalarType outType = sumResultType(self, dtype);
  bool widen = outType != in.dtype();
  return runReduction<true>(name, in, mask, keepdim, outType,
                            [&]<typename T>(const ReductionPlan& p) {
    if constexpr (std::is_integral_v<T>) {
      if (widen) return cpu::reduceKernel<T>(p, Op<T, int64_t>{});
    }
    cpu::reduceKernel<T>(p, Op<T, T>{});
  });
}

Tensor meanImpl(const Tensor& self, std::optional<IntArrayRef> dim, bool keepdim,
                std::optional<ScalarType> dtype) {
  if (dtype) {
    KILN_CHECK(isFloatingType(*dtype), "mean(): could not infer output dtype. Optional dtype must ",
               "be either a floating point or complex dtype. Got: ", scalarTypeShortName(*dtype));
  } else {
    KILN_CHECK(isFloatingType(self.dtype()), "mean(): could not infer output dtype. Input dtype ",
               "must be either a floating point or complex dtype. Got: ",
               scalarTypeShortName(self.dtype()));
  }
  DimMask mask = makeDimMask(dim, self.dim());
  Tensor in = castTo(self, dtype);
  int64_t count = 1;
  for (int64_t d = 0; d < in.dim(); ++d)
    if (mask >> d & 1) count *= in.sizes()[size_t(d)];
  return runReduction<false>("mean", in, mask, keepdim, in.dtype(),
                             [&]<typename T>(const ReductionPlan& p) {
    cpu::reduceKernel<T>(p, MeanOp<T>(count));
  });
}

template <bool kAll>
Tensor logicalReduction(const char* name, const Tensor& self, DimMask mask, bool keepdim) {
  ScalarType outType = self.dtype() == ScalarType::UInt8 ? ScalarType::UInt8 : ScalarType::Bool;
  return runReduction<true>(name, self, mask, keepdim, outType,
                            [&]<typename T>(const ReductionPlan& p) {
    if constexpr (std::is_same_v<T, uint8_t>)
      cpu::reduceKernel<T>(p, LogicalOp<T, uint8_t, kAll>{});
    else cpu::reduceKernel<T>(p, LogicalOp<T, bool, kAll>{});
  });
}

std::string formatOrder(double p) {
  std::ostringstream s;
  s << p;
  return s.str();
}

} // namespace

Tensor sum(const Tensor& self, std::optional<ScalarType> dtype) {
  return sumLike<SumOp>("sum", self, std::nullopt, false, dtype);
}

Tensor sumDim(const Tensor& self, std::optional<IntArrayRef> dim, bool keepdim,
              std::optional<ScalarType> dtype) {
  return sumLike<SumOp>("sum", self, dim, keepdim, dtype);
}

Tensor mean(const Tensor& self, std::optional<ScalarType> dtype) {
  return meanImpl(self, std::nullopt, false, dtype);
}

Tensor meanDim(const Tensor& self, std::optional<IntArrayRef> dim, bool keepdim,
               std::optional<ScalarType> dtype) {
  return meanImpl(self, dim, keepdim, dtype);
}

Tensor prod(const Tensor& self, std::optional<ScalarType> dtype) {
  return sumLike<ProdOp>("prod", self, std::nullopt, false, dtype);
}

Tensor prodDim(const Tensor& self, int64_t dim, bool keepdim, std::optional<ScalarType> dtype) {
  return sumLike<ProdOp>("prod", self, IntArrayRef{dim}, keepdim, dtype);
}

Tensor all(const Tensor& self) {
  return logicalReduction<true>("all", self, makeDimMask(std::nullopt, self.dim()), false);
}

Tensor allDim(const Tensor& self, int64_t dim, bool keepdim) {
  return logicalReduction<true>("all", self, makeDimMask(IntArrayRef{dim}, self.dim()), keepdim);
}

Tensor allDims(const Tensor& self, std::optional<IntArrayRef> dim, bool keepdim) {
  return logicalReduction<true>("all", self, makeDimMask(dim, self.dim(), false), keepdim);
}

Tensor any(const Tensor& self) {
  return logicalReduction<false>("any", self, makeDimMask(std::nullopt, self.dim()), false);
}

Tensor anyDim(const Tensor& self, int64_t dim, bool keepdim) {
  return logicalReduction<false>("any", self, makeDimMask(IntArrayRef{dim}, self.dim()), keepdim);
}

Tensor anyDims(const Tensor& self, std::optional<IntArrayRef> dim, bool keepdim) {
  return logicalReduction<false>("any", self, makeDimMask(dim, self.dim(), false), keepdim);
}

Tensor logsumexp(const Tensor& self, IntArrayRef dim, bool keepdim) {
  DimMask mask = makeDimMask(dim, self.dim());
  // PyTorch reduces every dim for an empty list, but without keepdim its result cannot take
  // the kept-dim maximum it adds back: mirror that error.
  KILN_CHECK(!dim.empty() || keepdim || self.dim() == 0, "logsumexp(): output with shape [] ",
             "doesn't match the broadcast shape ", shapeString(DimVector(size_t(self.dim()), 1)));
  // Integers and bool give the default float dtype.
  Tensor in = isFloatingType(self.dtype()) ? self : ops::to(self, ScalarType::Float32);
  return runReduction<false>("logsumexp", in, mask, keepdim, in.dtype(),
                      [&]<typename T>(const ReductionPlan& p) {
                        cpu::reduceKernel<T>(p, LogSumExpOp<T>{});
                      });
}

Tensor linalgVectorNorm(const Tensor& self, const Scalar& ord, std::optional<IntArrayRef> dim,
                        bool keepdim, std::optional<ScalarType> dtype) {
  KILN_CHECK(isFloatingType(self.dtype()), "linalg.vector_norm: Expected a floating point or ",
             "complex tensor as input. Got ", scalarTypeShortName(self.dtype()));
  if (dtype) {
    KILN_CHECK(isFloatingType(*dtype), "linalg.vector_norm: dtype should be floating point or ",
               "complex, but got ", scalarTypeShortName(*dtype));
    KILN_CHECK(promoteTypes(self.dtype(), *dtype) == *dtype, "linalg.vector_norm: the dtype of ",
               "the input (", scalarTypeShortName(self.dtype()), ") should be convertible without ",
               "narrowing to the specified dtype (", scalarTypeShortName(*dtype), ")");
  }
  double p = ord.toDouble();
  DimMask mask = makeDimMask(dim, self.dim());
  if (self.numel() == 0 && (p < 0 || p == std::numeric_limits<double>::infinity())) {
    KILN_CHECK(dim && !dim->empty(), "linalg.vector_norm cannot compute the ", formatOrder(p),
               " norm on an empty tensor because the operation does not have an identity");
    for (int64_t d = 0; d < self.dim(); ++d) {
      KILN_CHECK(!(mask >> d & 1) || self.sizes()[size_t(d)] != 0,
                 "linalg.vector_norm cannot compute the ", formatOrder(p),
                 " norm on the dimension ",
                 d, " because this dimension is empty and the operation does not have an identity");
    }
  }
  Tensor in = castTo(self, dtype);
  return runReduction<false>("linalg.vector_norm", in, mask, keepdim, in.dtype(),
                      [&]<typename T>(const ReductionPlan& pl) {
    using M = opmath_t<T>;
    constexpr double inf = std::numeric_limits<double>::infinity();
    if (p == 0) cpu::reduceKernel<T>(pl, NormOp<T, NormKind::Zero>{M(p)});
    else if (p == 1) cpu::reduceKernel<T>(pl, NormOp<T, NormKind::One>{M(p)});
    else if (p == 2) cpu::reduceKernel<T>(pl, NormOp<T, NormKind::Two>{M(p)});
    else if (p == inf) cpu::reduceKernel<T>(pl, NormOp<T, NormKind::Inf>{M(p)});
    else if (p == -inf) cpu::reduceKernel<T>(pl, NormOp<T, NormKind::NegInf>{M(p)});
    else cpu::reduceKernel<T>(pl, NormOp<T, NormKind::General>{M(p)});
  });
}

} // namespace kiln::kernels
