// var, std, var_mean, std_mean with a correction: Welford's running mean and sum of squared
// deviations in double (as PyTorch's CPU kernels accumulate), merged with Chan's formula.
#include <cstdint>
#include <cmath>

#include "generated/KernelDecls.h"
#include "runtime/Reduction.h"
#include "runtime/cpu/ReduceLoops.h"

namespace kiln::kernels {

namespace {

struct Moments {
  double mean;
  double m2; // sum of squared deviations from the mean
  double n;
};

template <typename T, bool kStd, bool kWithMean> struct WelfordOp {
  using acc_t = Moments;
  double correction;
  acc_t identity() const { return {0, 0, 0}; }
  acc_t step(acc_t a, opmath_t<T> x, int64_t) const {
    double v = double(x);
    double n = a.n + 1;
    double delta = v - a.mean;
    double mean = a.mean + delta / n;
    return {mean, a.m2 + delta * (v - mean), n};
  }
  acc_t combine(acc_t a, acc_t b) const {
    if (a.n == 0) return b;
    if (b.n == 0) return a;
    double n = a.n + b.n;
    double delta = b.mean - a.mean;
    return {a.mean + delta * (b.n / n), a.m2 + b.m2 + delta * delta * (a.n * b.n / n), n};
  }
  void write(char* const* out, acc_t a) const {
    // PyTorch divides by max(n - correction, 0): inf or nan when no degrees of freedom remain.
    double divisor = a.n > correction ? a.n - correction : 0.0;
    double var = a.m2 / divisor;
    *reinterpret_cast<T*>(out[0]) = T(kStd ? std::sqrt(var) : var);
    if constexpr (kWithMean) *reinterpret_cast<T*>(out[1]) = T(a.n == 0 ? NAN : a.mean);
  }
};

template <bool kStd, bool kWithMean>
std::tuple<Tensor, Tensor> moments(const Tensor& self, std::optional<IntArrayRef> dim,
                                   const std::optional<Scalar>& correction, bool keepdim) {
  KILN_CHECK(isFloatingType(self.dtype()),
             "std and var only support floating point and complex dtypes");
  DimMask mask = makeDimMask(dim, self.dim());
  Tensor result = emptyReduction(self, mask, keepdim, self.dtype());
  Tensor mean = kWithMean ? emptyReduction(self, mask, keepdim, self.dtype()) : Tensor();
  if (self.isMeta()) return {result, mean};
  double c = correction ? correction->toDouble() : 1.0;
  ReductionPlan plan = kWithMean ? planReduction(self, mask, {result, mean})
                                 : planReduction(self, mask, {result});
  KILN_DISPATCH_FLOATING(self.dtype(), kStd ? "std" : "var", [&]<typename scalar_t>() {
    cpu::reduceKernel<scalar_t>(plan, WelfordOp<scalar_t, kStd, kWithMean>{c});
  });
  return {result, mean};
}

} // namespace

Tensor varCorrection(const Tensor& self, std::optional<IntArrayRef> dim,
                     const std::optional<Scalar>& correction, bool keepdim) {
  return std::get<0>(moments<false, false>(self, dim, correction, keepdim));
}

Tensor stdCorrection(const Tensor& self, std::optional<IntArrayRef> dim,
                     const std::optional<Scalar>& correction, bool keepdim) {
  return std::get<0>(moments<true, false>(self, dim, correction, keepdim));
}

std::tuple<Tensor, Tensor> varMeanCorrection(const Tensor& self, std::optional<IntArrayRef> dim,
                                             const std::optional<Scalar>& correction,
                                             bool keepdim) {
  return moments<false, true>(self, dim, correction, keepdim);
}

std::tuple<Tensor, Tensor> stdMeanCorrection(const Tensor& self, std::optional<IntArrayRef> dim,
                                             const std::optional<Scalar>& correction,
                                             bool keepdim) {
  return moments<true, true>(self, dim, correction, keepdim);
}

} // namespace kiln::kernels
