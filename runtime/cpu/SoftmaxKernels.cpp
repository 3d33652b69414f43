// softmax and log_softmax along a dim, numerically stable: per row the maximum m, then
// s = sum(exp(x - m)); softmax = exp(x - m) / s, log_softmax = x - m - log(s). The 16-bit
// floats compute in float.
#include <cstdint>
#include <cmath>
#include <limits>

#include "generated/KernelDecls.h"
#include "runtime/cpu/RowLoops.h"
#include "runtime/cpu/VectorizableMath.h"

namespace kiln::kernels {

namespace {

constexpr int kLanes = 16;

// One contiguous row of n elements. Max and sum run in kLanes independent accumulators so
// the compiler can vectorize them.
template <typename T, bool kLog> void softmaxRow(const T* x, T* y, int64_t n) {
  using M = opmath_t<T>;
  M lanes[kLanes];
  std::fill(lanes, lanes + kLanes, -std::numeric_limits<M>::infinity());
  int64_t body = n / kLanes * kLanes;
  for (int64_t i = 0; i < body; i += kLanes)
    for (int k = 0; k < kLanes; ++k) lanes[k] = std::max(lanes[k], cpu::toOpmath(x[i + k]));
  M mx = -std::numeric_limits<M>::infinity();
  for (int k = 0; k < kLanes; ++k) mx = std::max(mx, lanes[k]);
  for (int64_t i = body; i < n; ++i) mx = std::max(mx, cpu::toOpmath(x[i]));

  std::fill(lanes, lanes + kLanes, M(0));
  for (int64_t i = 0; i < body; i += kLanes) {
    for (int k = 0; k < kLanes; ++k) {
      M e = cpu::expOpmath(cpu::toOpmath(x[i + k]) - mx);
      lanes[k] += e;
      if constexpr (!kLog && std::is_same_v<T, M>) y[i + k] = e;
    }
  }
  M sum = 0;
  for (int k = 0; k < kLanes; ++k) sum += lanes[k];
  for (int64_t i = body; i < n; ++i) {
    M e = cpu::expOpmath(cpu::toOpmath(x[i]) - mx);
    sum += e;
    if constexpr (!kLog && std::is_same_v<T, M>) y[i] = e;
  }

  if constexpr (kLog) {
    // (x - max) - log(sum): adding log(sum) to max first would round at max's magnitude.
    M logSum = std::log(sum);
    for (int64_t i = 0; i < n; ++i) y[i] = T((cpu::toOpmath(x[i]) - mx) - logSum);
  } else if constexpr (std::is_same_v<T, M>) {
    M scale = M(1) / sum;
    for (int64_t i = 0; i < n; ++i) y[i] = y[i] * scale;
  } else {
    M scale = M(1) / sum;
    for (int64_t i = 0; i < n; ++i) y[i] = T(cpu::expOpmath(cpu::toOpmath(x[i]) - mx) * scale);
  }
}

// `lanes` rows side by side: element j of row l at j * stride + l.
template <typename T, bool kLog>
void softmaxLanes(const T* x, T* y, int64_t n, int64_t stride, int64_t lanes) {
  using M = opmath_t<T>;
  M mx[kLanes], sum[kLanes];
  for (int64_t l = 0; l < lanes; ++l) {
    mx[l] = -std::numeric_limits<M>::infinity();
    sum[l] = 0;
  }
  for (int64_t j = 0; j < n; ++j)
    for (int64_t l = 0; l < lanes; ++l) mx[l] = std::max(mx[l], cpu::toOpmath(x[j * stride + l]));
  for (int64_t j = 0; j < n; ++j)
    for (int64_t l = 0; l < lanes; ++l)
      sum[l] += cpu::expOpmath(cpu::toOpmath(x[j * stride + l]) - mx[l]);
  for (int64_t l = 0; l < lanes; ++l) sum[l] = kLog ? std::log(sum[l]) : M(1) / sum[l];
  for (int64_t j = 0; j < n; ++j) {
    for (int64_t l = 0; l < lanes; ++l) {
      M v = cpu::toOpmath(x[j * stride + l]) - mx[l];
      y[j * stride + l] = kLog ? T(v - sum[l]) : T(cpu::expOpmath(v) * sum[l]);
    }
  }
}

template <bool kLog>
Tensor softmaxImpl(const char* kernelName, const Tensor& self, int64_t dim,
                   std::optional<ScalarType> dtype) {
  Tensor in = dtype && *dtype != self.dtype() ? ops::to(self, *dtype) : self;
  int64_t d = wrapDim(dim, in.dim());
  if (!isFloatingType(in.dtype())) {
    throw NotImplementedError(strCat("\"", kernelName, "\" not implemented for '",
                                     scalarTypeShortName(in.dtype()), "'"));
  }
  in = cpu::contiguousInput(in);
  Tensor out = Tensor::empty(in.sizes(), in.dtype(), in.device());
  if (in.isMeta()) return out;
  cpu::RowLayout layout = cpu::rowLayout(in.sizes(), d);
  KILN_DISPATCH_FLOATING(in.dtype(), kernelName, [&]<typename T>() {
    const T* x = in.data<T>();
    T* y = out.data<T>();
    cpu::forEachRowBlock(layout, kLanes, [&](int64_t base, int64_t lanes) {
      if (layout.inner == 1) softmaxRow<T, kLog>(x + base, y + base, layout.n);
      else softmaxLanes<T, kLog>(x + base, y + base, layout.n, layout.inner, lanes);
    });
  });
  return out;
}

} // namespace

Tensor softmax(const Tensor& self, int64_t dim, std::optional<ScalarType> dtype) {
  return softmaxImpl<false>("softmax_kernel_impl", self, dim, dtype);
}

Tensor logSoftmax(const Tensor& self, int64_t dim, std::optional<ScalarType> dtype) {
  return softmaxImpl<true>("log_softmax_kernel_impl", self, dim, dtype);
}

} // namespace kiln::kernels
