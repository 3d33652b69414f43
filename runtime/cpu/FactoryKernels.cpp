// Factories: empty, zeros, ones, full, scalar_tensor, the *_like and new_* families, arange,
// linspace, eye; and fill_. Every one works for meta tensors (shapes only).
#include <cstdint>
#include <algorithm>
#include <cmath>
#include <numeric>

#include "generated/KernelDecls.h"
#include "runtime/DefaultDtype.h"
#include "runtime/ViewGeometry.h"
#include "runtime/CheckedConvert.h"
#include "runtime/cpu/Loops.h"

namespace kiln::kernels {

namespace {

void fillWith(const Tensor& t, const Scalar& value) {
  // The value is checked even when nothing is written: full((0,), 300, dtype=uint8) raises too.
  KILN_DISPATCH_ALL(t.dtype(), "fill_",
                    [&]<typename scalar_t>() { checkedConvert<scalar_t>(value); });
  if (t.isMeta() || t.numel() == 0) return;
  TensorIteratorConfig c;
  c.opName = "fill_";
  c.outputs = {t};
  c.castInputs = false;
  c.checkOutputCast = false;
  c.outputDtype = t.dtype();
  c.computeDtype = t.dtype();
  c.inputs = {Tensor::scalarTensor(value, t.dtype())};
  TensorIterator iter(std::move(c));
  KILN_DISPATCH_ALL(t.dtype(), "fill_", [&]<typename scalar_t>() {
    scalar_t v = value.to<scalar_t>();
    iter.forEach([v](char** data, const int64_t* strides, int64_t n) {
      if (strides[0] == int64_t(sizeof(scalar_t))) {
        auto* out = reinterpret_cast<scalar_t*>(data[0]);
        for (int64_t i = 0; i < n; ++i)
          out[i] = v;
      } else {
        for (int64_t i = 0; i < n; ++i)
          *reinterpret_cast<scalar_t*>(data[0] + i * strides[0]) = v;
      }
    });
  });
}

// The default dtype of a factory given its fill value: Python-number rules (float -> the default
// dtype, float32 unless set_default_dtype changed it).
ScalarType defaultDtypeFor(const Scalar& v) {
  if (v.isBool()) return ScalarType::Bool;
  if (v.isIntegral()) return ScalarType::Int64;
  return defaultFloatType();
}

// empty_like's layout rule (memory_format=preserve): a dense input's strides are kept, anything
// else (overlapping, gappy) gets contiguous strides.
Tensor emptyLikeImpl(const Tensor& self, std::optional<ScalarType> dtype,
                     std::optional<Device> device) {
  ScalarType dt = dtype.value_or(self.dtype());
  Device dev = device.value_or(self.device());
  if (kiln::isNonOverlappingAndDense(self.sizes(), self.strides()))
    return Tensor::emptyStrided(self.sizes(), self.strides(), dt, dev);
  return Tensor::empty(self.sizes(), dt, dev);
}

// Runs body(i) -> value for every element of a new contiguous 1-D tensor `out`.
template <typename T, typename F> void fillIndexed(const Tensor& out, const F& body) {
  if (out.isMeta()) return;
  T* data = out.data<T>();
  int64_t n = out.numel();
#pragma omp parallel for if (n > 65536)
  for (int64_t i = 0; i < n; ++i)
    data[i] = body(i);
}

// PyTorch's compute_arange_size: exact integer arithmetic for int64, double otherwise.
int64_t arangeLength(ScalarType dtype, const Scalar& start, const Scalar& end, const Scalar& step) {
  double dstart = start.toDouble(), dend = end.toDouble(), dstep = step.toDouble();
  KILN_CHECK(dstep > 0 || dstep < 0, "step must be nonzero");
  KILN_CHECK(std::isfinite(dstart) && std::isfinite(dend),
             "unsupported range: ", Scalar(dstart).toString(), " -> ", Scalar(dend).toString());
  KILN_CHECK((dstep > 0 && dend >= dstart) || (dstep < 0 && dend <= dstart),
             "upper bound and lower bound inconsistent with step sign");
  double size;
  if (dtype == ScalarType::Int64) {
    int64_t xstart = start.toInt(), xend = end.toInt(), xstep = step.toInt();
    KILN_CHECK_VALUE(xstep != 0, "step must be nonzero");
    int64_t sgn = (xstep > 0) - (xstep < 0);
    size = std::ceil(double((xend - xstart + xstep - sgn) / xstep));
  } else {
    size = std::ceil((dend - dstart) / dstep);
  }
  KILN_CHECK(size >= 0 && size <= 9.2233720368547758e18, "invalid size, possible overflow?");
  return int64_t(size);
}

Tensor eyeImpl(int64_t n, int64_t m, std::optional<ScalarType> dtype,
               std::optional<Device> device) {
  KILN_CHECK(n >= 0, "n must be greater or equal to 0, got ", n);
  KILN_CHECK(m >= 0, "m must be greater or equal to 0, got ", m);
  Tensor out =
      Tensor::empty({n, m}, dtype.value_or(defaultFloatType()), device.value_or(Device()));
  fillWith(out, Scalar(int64_t(0)));
  if (out.isMeta()) return out;
  KILN_DISPATCH_ALL(out.dtype(), "eye", [&]<typename scalar_t>() {
    scalar_t* data = out.data<scalar_t>();
    for (int64_t i = 0; i < std::min(n, m); ++i)
      data[i * m + i] = scalar_t(1);
  });
  return out;
}

} // namespace

Tensor empty(IntArrayRef size, std::optional<ScalarType> dtype, std::optional<Device> device) {
  return Tensor::empty(size, dtype.value_or(defaultFloatType()), device.value_or(Device()));
}

Tensor emptyStrided(IntArrayRef size, IntArrayRef stride, std::optional<ScalarType> dtype,
                    std::optional<Device> device) {
  KILN_CHECK(size.size() == stride.size(), "mismatch in length of strides and shape");
  for (int64_t s : stride)
    KILN_CHECK(s >= 0,
               "as_strided: Negative strides are not supported at the moment, got strides: ",
               shapeString(stride));
  return Tensor::emptyStrided(size, stride, dtype.value_or(defaultFloatType()),
                              device.value_or(Device()));
}

Tensor zeros(IntArrayRef size, std::optional<ScalarType> dtype, std::optional<Device> device) {
  Tensor t = empty(size, dtype, device);
  fillWith(t, Scalar(int64_t(0)));
  return t;
}

Tensor ones(IntArrayRef size, std::optional<ScalarType> dtype, std::optional<Device> device) {
  Tensor t = empty(size, dtype, device);
  fillWith(t, Scalar(int64_t(1)));
  return t;
}

Tensor full(IntArrayRef size, const Scalar& fillValue, std::optional<ScalarType> dtype,
            std::optional<Device> device) {
  Tensor t = empty(size, dtype.value_or(defaultDtypeFor(fillValue)), device);
  fillWith(t, fillValue);
  return t;
}

Tensor scalarTensor(const Scalar& s, std::optional<ScalarType> dtype,
                    std::optional<Device> device) {
  // Unlike full, the default dtype whatever the value's kind (torch.scalar_tensor(1) is 1.).
  Tensor t = empty({}, dtype.value_or(defaultFloatType()), device);
  fillWith(t, s);
  return t;
}

Tensor emptyLike(const Tensor& self, std::optional<ScalarType> dtype,
                 std::optional<Device> device) {
  return emptyLikeImpl(self, dtype, device);
}

Tensor zerosLike(const Tensor& self, std::optional<ScalarType> dtype,
                 std::optional<Device> device) {
  Tensor t = emptyLikeImpl(self, dtype, device);
  fillWith(t, Scalar(int64_t(0)));
  return t;
}

Tensor onesLike(const Tensor& self, std::optional<ScalarType> dtype, std::optional<Device> device) {
  Tensor t = emptyLikeImpl(self, dtype, device);
  fillWith(t, Scalar(int64_t(1)));
  return t;
}

Tensor fullLike(const Tensor& self, const Scalar& fillValue, std::optional<ScalarType> dtype,
                std::optional<Device> device) {
  Tensor t = emptyLikeImpl(self, dtype, device);
  fillWith(t, fillValue);
  return t;
}

Tensor newEmpty(const Tensor& self, IntArrayRef size, std::optional<ScalarType> dtype,
                std::optional<Device> device) {
  return Tensor::empty(size, dtype.value_or(self.dtype()), device.value_or(self.device()));
}

Tensor newZeros(const Tensor& self, IntArrayRef size, std::optional<ScalarType> dtype,
                std::optional<Device> device) {
  Tensor t = newEmpty(self, size, dtype, device);
  fillWith(t, Scalar(int64_t(0)));
  return t;
}

Tensor newOnes(const Tensor& self, IntArrayRef size, std::optional<ScalarType> dtype,
               std::optional<Device> device) {
  Tensor t = newEmpty(self, size, dtype, device);
  fillWith(t, Scalar(int64_t(1)));
  return t;
}

Tensor newFull(const Tensor& self, IntArrayRef size, const Scalar& fillValue,
               std::optional<ScalarType> dtype, std::optional<Device> device) {
  // new_full keeps self's dtype whatever the fill value's kind.
  Tensor t = newEmpty(self, size, dtype, device);
  fillWith(t, fillValue);
  return t;
}

Tensor arangeStartStep(const Scalar& start, const Scalar& end, const Scalar& step,
                       std::optional<ScalarType> dtype, std::optional<Device> device) {
  bool anyFloat = start.isFloating() || end.isFloating() || step.isFloating();
  ScalarType dt = dtype.value_or(anyFloat ? defaultFloatType() : ScalarType::Int64);
  if (dt == ScalarType::Bool) throwUnsupportedDtype("arange_cpu", dt);
  int64_t n = arangeLength(dt, start, end, step);
  Tensor out = Tensor::empty({n}, dt, device.value_or(Device()));
  // Values are start + step * i in PyTorch's CPU accumulate type: int64 for integers, double
  // for float and double, float for the 16-bit floats.
  KILN_DISPATCH_NUMERIC(dt, "arange_cpu", [&]<typename scalar_t>() {
    using Acc = std::conditional_t<std::is_integral_v<scalar_t>, int64_t,
                                   std::conditional_t<std::is_same_v<opmath_t<scalar_t>, float> &&
                                                          !std::is_same_v<scalar_t, float>,
                                                      float, double>>;
    Acc a = start.to<Acc>(), s = step.to<Acc>();
    if constexpr (std::is_integral_v<scalar_t>)
      // Wraps for narrow types, like PyTorch (arange(0, 300, 100, dtype=int8) ends in -56).
      fillIndexed<scalar_t>(
          out, [a, s](int64_t i) { return scalar_t(uint64_t(a) + uint64_t(s) * uint64_t(i)); });
    else
      fillIndexed<scalar_t>(out, [a, s](int64_t i) { return scalar_t(a + s * Acc(i)); });
  });
  return out;
}

Tensor arange(const Scalar& end, std::optional<ScalarType> dtype, std::optional<Device> device) {
  return arangeStartStep(Scalar(int64_t(0)), end, Scalar(int64_t(1)), dtype, device);
}

Tensor arangeStart(const Scalar& start, const Scalar& end, std::optional<ScalarType> dtype,
                   std::optional<Device> device) {
  return arangeStartStep(start, end, Scalar(int64_t(1)), dtype, device);
}

Tensor linspace(const Scalar& start, const Scalar& end, int64_t steps,
                std::optional<ScalarType> dtype, std::optional<Device> device) {
  KILN_CHECK(steps >= 0, "number of steps must be non-negative");
  ScalarType dt = dtype.value_or(defaultFloatType());
  if (dt == ScalarType::Bool) throwUnsupportedDtype("linspace_cpu", dt);
  Tensor out = Tensor::empty({steps}, dt, device.value_or(Device()));
  KILN_DISPATCH_NUMERIC(dt, "linspace_cpu", [&]<typename scalar_t>() {
    scalar_t lo = checkedConvert<scalar_t>(start), hi = checkedConvert<scalar_t>(end);
    if (steps == 1) {
      fillIndexed<scalar_t>(out, [lo](int64_t) { return lo; });
    } else if (steps > 1) {
      // PyTorch's kernel: the first half counts up from start, the second down from end (so
      // both ends are exact). The step is double for integers and the dtype itself otherwise,
      // each operation rounding to it (as c10::Half arithmetic does).
      using Step = std::conditional_t<std::is_integral_v<scalar_t>, double, scalar_t>;
      using M = std::conditional_t<std::is_integral_v<scalar_t>, double, opmath_t<scalar_t>>;
      auto r = [](M v) { return Step(v); };
      Step step = r(M(r(M(Step(hi)) - M(Step(lo)))) / M(Step(steps - 1)));
      int64_t halfway = steps / 2;
      fillIndexed<scalar_t>(out, [=](int64_t i) {
        if (i < halfway) return scalar_t(M(r(M(Step(lo)) + M(r(M(step) * M(Step(i)))))));
        return scalar_t(M(r(M(Step(hi)) - M(r(M(step) * M(Step(steps - i - 1)))))));
      });
    }
  });
  return out;
}

Tensor eye(int64_t n, std::optional<ScalarType> dtype, std::optional<Device> device) {
  return eyeImpl(n, n, dtype, device);
}

Tensor eyeM(int64_t n, int64_t m, std::optional<ScalarType> dtype, std::optional<Device> device) {
  return eyeImpl(n, m, dtype, device);
}

Tensor fill_(const Tensor& self, const Scalar& value) {
  fillWith(self, value);
  self.bumpVersion();
  return self;
}

} // namespace kiln::kernels
