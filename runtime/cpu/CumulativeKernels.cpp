// cumsum and cumprod along a dim. Integers and bool give int64 unless dtype= says otherwise;
// the running value is kept in PyTorch's CPU accumulation type (double for float32 too).
#include "generated/KernelDecls.h"
#include "runtime/cpu/RowLoops.h"
#include "runtime/cpu/VectorizableMath.h"
#include <cstdint>

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

} // namespace

Tensor cumsum(const Tensor& self, int64_t dim, std::optional<ScalarType> dtype) {
  return scan<false>("cumsum_out_cpu", self, dim, dtype);
}

Tensor cumprod(const Tensor& self, int64_t dim, std::optional<ScalarType> dtype) {
  return scan<true>("cumprod_out_cpu", self, dim, dtype);
}

} // namespace kiln::kernels
