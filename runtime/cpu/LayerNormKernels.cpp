// layer_norm: each row (the trailing normalized_shape dims) is normalized by its mean and
// biased variance, then scaled and shifted. The moments come from one pass over the row
// (Welford in float, double for float64, in vectorizable lanes that share their count).
#include <cstdint>
#include <cmath>

#include "generated/KernelDecls.h"
#include "runtime/cpu/RowLoops.h"
#include "runtime/cpu/VectorizableMath.h"

namespace kiln::kernels {

namespace {

constexpr int kLanes = 16;

template <typename A> struct RowMoments {
  A mean;
  A m2;
};

// Mean and sum of squared deviations of n contiguous values.
template <typename T, typename A> RowMoments<A> rowMoments(const T* x, int64_t n) {
  A mean[kLanes] = {}, m2[kLanes] = {};
  const int64_t rows = n / kLanes;
  for (int64_t r = 0; r < rows; ++r) {
    const A inv = A(1) / A(r + 1);
    for (int k = 0; k < kLanes; ++k) {
      A v = A(cpu::toOpmath(x[r * kLanes + k]));
      A delta = v - mean[k];
      mean[k] += delta * inv;
      m2[k] += delta * (v - mean[k]);
    }
  }
  // Merge the lanes pairwise (equal counts), then fold in the tail one value at a time.
  A count = A(rows);
  for (int half = kLanes / 2; half >= 1; half /= 2) {
    for (int k = 0; k < half; ++k) {
      A delta = mean[k + half] - mean[k];
      mean[k] += delta / 2;
      m2[k] += m2[k + half] + delta * delta * count / 2;
    }
    count *= 2;
  }
  RowMoments<A> m{mean[0], m2[0]};
  for (int64_t i = rows * kLanes; i < n; ++i) {
    A v = A(cpu::toOpmath(x[i]));
    count += 1;
    A delta = v - m.mean;
    m.mean += delta / count;
    m.m2 += delta * (v - m.mean);
  }
  return m;
}

template <typename T, typename P>
void layerNormRows(const Tensor& input, const P* weight, const P* bias, Tensor& out, int64_t n,
                   double eps) {
  using A = opmath_t<T>;
  const T* x = input.data<T>();
  T* y = out.data<T>();
  cpu::RowLayout layout{input.numel() / n, n, 1};
  cpu::forEachRowBlock(layout, 1, [&](int64_t base, int64_t) {
    RowMoments<A> m = rowMoments<T, A>(x + base, n);
    A var = std::max(m.m2 / A(n), A(0));
    A rstd = A(1) / std::sqrt(var + A(eps));
    const T* row = x + base;
    T* dst = y + base;
    for (int64_t j = 0; j < n; ++j) {
      A v = (A(cpu::toOpmath(row[j])) - m.mean) * rstd;
      if (weight) v *= A(cpu::toOpmath(weight[j]));
      if (bias) v += A(cpu::toOpmath(bias[j]));
      dst[j] = T(v);
    }
  });
}

// PyTorch's parameter dtype rules: all equal to the input's, or all float32 for a 16-bit input.
void checkParameterDtypes(const Tensor& input, const std::optional<Tensor>& weight,
                          const std::optional<Tensor>& bias) {
  std::optional<ScalarType> first;
  for (const auto* p : {&weight, &bias})
    if (*p && !first) first = (*p)->dtype();
  if (!first) return;
  if (*first != input.dtype()) {
    for (const auto* p : {&weight, &bias}) {
      KILN_CHECK(!*p || (*p)->dtype() == ScalarType::Float32,
                 "mixed dtype (CPU): expect parameter to have scalar type of Float");
    }
    KILN_CHECK(input.dtype() == ScalarType::Float16 || input.dtype() == ScalarType::BFloat16,
               "mixed dtype (CPU): expect input to have scalar type of BFloat16 or Half");
    return;
  }
  for (const auto* p : {&weight, &bias}) {
    KILN_CHECK(!*p || (*p)->dtype() == input.dtype(), "expected scalar type ",
               scalarTypeShortName(input.dtype()), " but found ",
               scalarTypeShortName((*p)->dtype()));
  }
}

} // namespace

Tensor layerNorm(const Tensor& input, IntArrayRef normalizedShape,
                 const std::optional<Tensor>& weight, const std::optional<Tensor>& bias,
                 double eps) {
  KILN_CHECK(!normalizedShape.empty(), "Expected normalized_shape to be at least 1-dimensional, ",
             "i.e., containing at least one element, but got normalized_shape = ",
             shapeString(normalizedShape));
  for (const auto& [p, name] : {std::pair{&weight, "weight"}, std::pair{&bias, "bias"}}) {
    KILN_CHECK(!*p || DimVector((*p)->sizes()) == DimVector(normalizedShape), "Expected ", name,
               " to be of same shape as normalized_shape, but got ", name, " of shape ",
               (*p)->shapeString(), " and normalized_shape = ", shapeString(normalizedShape));
  }
  int64_t ndim = input.dim(), nnorm = int64_t(normalizedShape.size());
  bool matches = ndim >= nnorm;
  for (int64_t i = 0; matches && i < nnorm; ++i)
    matches = input.sizes()[size_t(ndim - nnorm + i)] == normalizedShape[size_t(i)];
  if (!matches) {
    std::string expected = "[*";
    for (int64_t s : normalizedShape) expected += ", " + std::to_string(s);
    throw Error(strCat("Given normalized_shape=", shapeString(normalizedShape),
                       ", expected input with shape ", expected, "], but got input of size",
                       input.shapeString()));
  }
  if (!isFloatingType(input.dtype())) {
    throw NotImplementedError(strCat("\"LayerNormKernelImpl\" not implemented for '",
                                     scalarTypeShortName(input.dtype()), "'"));
  }
  checkParameterDtypes(input, weight, bias);

  Tensor x = cpu::contiguousInput(input);
  Tensor out = Tensor::empty(input.sizes(), input.dtype(), input.device());
  int64_t n = computeNumel(normalizedShape);
  if (x.isMeta() || out.numel() == 0) return out;
  Tensor w = weight ? cpu::contiguousInput(*weight) : Tensor();
  Tensor b = bias ? cpu::contiguousInput(*bias) : Tensor();
  ScalarType paramType = w.defined() ? w.dtype() : b.defined() ? b.dtype() : input.dtype();
  KILN_DISPATCH_FLOATING(input.dtype(), "LayerNormKernelImpl", [&]<typename T>() {
    auto run = [&]<typename P>() {
      const P* wp = w.defined() ? w.data<P>() : nullptr;
      const P* bp = b.defined() ? b.data<P>() : nullptr;
      layerNormRows<T, P>(x, wp, bp, out, n, eps);
    };
    if constexpr (!std::is_same_v<T, float>) {
      if (paramType == ScalarType::Float32) return run.template operator()<float>();
    }
    run.template operator()<T>();
  });
  return out;
}

} // namespace kiln::kernels
