// cumsum and cumprod along a dim. Integers and bool give int64 unless dtype= says otherwise;
// the running value is kept in PyTorch's CPU accumulation type (double for float32 too).
// cummax / cummin (values and indices) and logcumsumexp, as PyTorch's CPU kernels compute them.
#include "generated/KernelDecls.h"
#include "runtime/cpu/RowLoops.h"
#include "runtime/cpu/VectorizableMath.h"
#include <cmath>
#include <cstdint>
#include <limits>

namespace kiln::kernels {

namespace {

constexpr int kLanes = 16;

// float32 accumulates in double, the 16-bit floats in float, integers in wrapping uint64.
template <typename T> using ScanAcc =
    std::conditional_t<std::is_integral_v<T>, uint64_t,
                       std::conditional_t<std::is_floating_point_v<T>, double, float>>;

template <typename T, bool kProd>
void scanLanes(const T* x, T* y, int64_t n, int64_t stride, int64_t lanes) {
  using A = ScanAcc<T>;
  if (stride == 1) { // one contiguous row
    A acc = A(kProd ? 1 : 0);
    for (int64_t j = 0; j < n; ++j) {
      A v = A(cpu::toOpmath(x[j]));
      acc = kProd ? A(acc * v) : A(acc + v);
      y[j] = T(acc);
    }
    return;
  }
  A acc[kLanes];
  for (int64_t l = 0; l < lanes; ++l) acc[l] = A(kProd ? 1 : 0);
  for (int64_t j = 0; j < n; ++j) {
    for (int64_t l = 0; l < lanes; ++l) {
      A v = A(cpu::toOpmath(x[j * stride + l]));
      acc[l] = kProd ? A(acc[l] * v) : A(acc[l] + v);
      y[j * stride + l] = T(acc[l]);
    }
  }
}

template <bool kProd>
Tensor scan(const char* kernelName, const Tensor& self, int64_t dim,
            std::optional<ScalarType> dtype) {
  int64_t d = wrapDim(dim, self.dim());
  ScalarType type = dtype ? *dtype
                    : isIntegralType(self.dtype(), true) ? ScalarType::Int64
                                                          : self.dtype();
  if (type == ScalarType::Bool) {
    throw NotImplementedError(strCat("\"", kernelName, "\" not implemented for 'Bool'"));
  }
  Tensor in = cpu::contiguousInput(type != self.dtype() ? ops::to(self, type) : self);
  Tensor out = Tensor::empty(in.sizes(), type, in.device());
  if (in.isMeta()) return out;
  cpu::RowLayout layout = cpu::rowLayout(in.sizes(), d);
  KILN_DISPATCH_NUMERIC(type, kernelName, [&]<typename T>() {
    const T* x = in.data<T>();
    T* y = out.data<T>();
    cpu::forEachRowBlock(layout, kLanes, [&](int64_t base, int64_t lanes) {
      scanLanes<T, kProd>(x + base, y + base, layout.n, layout.inner, lanes);
    });
  });
  return out;
}

template <typename T> bool isNan(T v) {
  if constexpr (std::is_integral_v<T>) return false;
  else return std::isnan(v);
}

// The running extremum of each row and the index it came from: a value replaces the running one
// when it compares >= (cummax) or <= (cummin), so ties take the later index; a NaN replaces
// anything and only a later NaN replaces it (PyTorch's cummax_cummin_helper).
template <bool kMax>
std::tuple<Tensor, Tensor> runningExtremum(const char* op, const Tensor& self, int64_t dim) {
  int64_t d = wrapDim(dim, self.dim());
  Tensor in = cpu::contiguousInput(self);
  Tensor values = Tensor::empty(in.sizes(), in.dtype(), in.device());
  Tensor indices = Tensor::empty(in.sizes(), ScalarType::Int64, in.device());
  if (in.isMeta()) return {values, indices};
  cpu::RowLayout layout = cpu::rowLayout(in.sizes(), d);
  KILN_DISPATCH_ALL(in.dtype(), op, [&]<typename T>() {
    const T* x = in.data<T>();
    T* v = values.data<T>();
    int64_t* ix = indices.data<int64_t>();
    cpu::forEachRowBlock(layout, kLanes, [&](int64_t base, int64_t lanes) {
      const int64_t stride = layout.inner;
      for (int64_t l = 0; l < lanes; ++l) {
        int64_t at = base + l;
        auto best = cpu::toOpmath(x[at]);
        int64_t bestIndex = 0;
        for (int64_t j = 0; j < layout.n; ++j, at += stride) {
          auto cur = cpu::toOpmath(x[at]);
          bool replaces = kMax ? cur >= best : cur <= best;
          if (isNan(cur) || (!isNan(best) && replaces)) {
            best = cur;
            bestIndex = j;
          }
          v[at] = T(best);
          ix[at] = bestIndex;
        }
      }
    });
  });
  return {values, indices};
}

// log(exp(x) + exp(y)) without overflow; equal infinities (or -inf and -inf) give x, a NaN
// propagates (PyTorch's _log_add_exp_helper).
template <typename A> A logAddExp(A x, A y) {
  A lo = std::isnan(y) ? y : std::min(x, y);
  A hi = std::isnan(y) ? y : std::max(x, y);
  if (lo != hi || std::isfinite(lo)) return std::log1p(std::exp(lo - hi)) + hi;
  return x;
}

} // namespace

std::tuple<Tensor, Tensor> cummax(const Tensor& self, int64_t dim) {
  return runningExtremum<true>("cummax", self, dim);
}

std::tuple<Tensor, Tensor> cummin(const Tensor& self, int64_t dim) {
  return runningExtremum<false>("cummin", self, dim);
}

// The running log(sum(exp)) from -inf, in double for float32 (PyTorch's CPU accumulation type).
Tensor logcumsumexp(const Tensor& self, int64_t dim) {
  int64_t d = wrapDim(dim, self.dim());
  if (!isFloatingType(self.dtype())) {
    throw NotImplementedError(strCat("\"logcumsumexp_out_cpu\" not implemented for '",
                                     scalarTypeShortName(self.dtype()), "'"));
  }
  Tensor in = cpu::contiguousInput(self);
  Tensor out = Tensor::empty(in.sizes(), in.dtype(), in.device());
  if (in.isMeta()) return out;
  cpu::RowLayout layout = cpu::rowLayout(in.sizes(), d);
  KILN_DISPATCH_FLOATING(in.dtype(), "logcumsumexp_out_cpu", [&]<typename T>() {
    using A = ScanAcc<T>;
    const T* x = in.data<T>();
    T* y = out.data<T>();
    cpu::forEachRowBlock(layout, kLanes, [&](int64_t base, int64_t lanes) {
      for (int64_t l = 0; l < lanes; ++l) {
        A acc = -std::numeric_limits<A>::infinity();
        for (int64_t j = 0, at = base + l; j < layout.n; ++j, at += layout.inner) {
          acc = logAddExp(A(cpu::toOpmath(x[at])), acc);
          y[at] = T(acc);
        }
      }
    });
  });
  return out;
}

Tensor cumsum(const Tensor& self, int64_t dim, std::optional<ScalarType> dtype) {
  return scan<false>("cumsum_out_cpu", self, dim, dtype);
}

Tensor cumprod(const Tensor& self, int64_t dim, std::optional<ScalarType> dtype) {
  return scan<true>("cumprod_out_cpu", self, dim, dtype);
}

} // namespace kiln::kernels
