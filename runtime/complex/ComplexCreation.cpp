// The Complex key's factories and fills: a complex tensor made as its view_as_real pairs (a fill
// value is the real part, the imaginary part zero; torch's complex randn draws both parts from a
// normal of variance 1/2).
#include <cmath>

#include "generated/KernelDecls.h"
#include "generated/Ops.h"
#include "runtime/complex/ComplexParts.h"

namespace kiln::kernels {

namespace {

DimVector withPair(IntArrayRef size) {
  DimVector s(size);
  s.push_back(2);
  return s;
}

// A new complex tensor of `dtype` whose parts are `re` everywhere and zero.
Tensor filled(IntArrayRef size, const Scalar& re, ScalarType dtype, std::optional<Device> device) {
  Tensor pairs = ops::zeros(withPair(size), toRealValueType(dtype), device);
  ops::fill_(ops::select(pairs, -1, 0), re);
  return ops::view_as_complex(pairs);
}

ScalarType likeDtype(const Tensor& self, std::optional<ScalarType> dtype) {
  return dtype.value_or(self.dtype());
}

} // namespace

Tensor complexZeros(IntArrayRef size, std::optional<ScalarType> dtype, std::optional<Device> device) {
  return ops::view_as_complex(ops::zeros(withPair(size), toRealValueType(*dtype), device));
}
Tensor complexOnes(IntArrayRef size, std::optional<ScalarType> dtype, std::optional<Device> device) {
  return filled(size, Scalar(1.0), *dtype, device);
}
Tensor complexFull(IntArrayRef size, const Scalar& value, std::optional<ScalarType> dtype,
                   std::optional<Device> device) {
  return filled(size, value, *dtype, device);
}

// The *_like factories: `self` may be complex with a real dtype= (then no complex result).
Tensor complexZerosLike(const Tensor& self, std::optional<ScalarType> dtype, std::optional<Device> device) {
  ScalarType t = likeDtype(self, dtype);
  Device d = device.value_or(self.device());
  return isComplexType(t) ? complexZeros(self.sizes(), t, d) : ops::zeros(self.sizes(), t, d);
}
Tensor complexOnesLike(const Tensor& self, std::optional<ScalarType> dtype, std::optional<Device> device) {
  ScalarType t = likeDtype(self, dtype);
  Device d = device.value_or(self.device());
  return isComplexType(t) ? filled(self.sizes(), Scalar(1.0), t, d) : ops::ones(self.sizes(), t, d);
}
Tensor complexFullLike(const Tensor& self, const Scalar& value, std::optional<ScalarType> dtype,
                       std::optional<Device> device) {
  ScalarType t = likeDtype(self, dtype);
  Device d = device.value_or(self.device());
  return isComplexType(t) ? filled(self.sizes(), value, t, d) : ops::full(self.sizes(), value, t, d);
}

Tensor complexRandn(IntArrayRef size, std::optional<ScalarType> dtype, std::optional<Device> device) {
  Tensor pairs = ops::randn(withPair(size), toRealValueType(*dtype), device);
  return ops::view_as_complex(ops::mul(pairs, Scalar(std::sqrt(0.5))));
}
Tensor complexRandnLike(const Tensor& self, std::optional<ScalarType> dtype, std::optional<Device> device) {
  ScalarType t = likeDtype(self, dtype);
  Device d = device.value_or(self.device());
  return isComplexType(t) ? complexRandn(self.sizes(), t, d) : ops::randn(self.sizes(), t, d);
}

Tensor complexFill_(const Tensor& self, const Scalar& value) {
  Tensor pairs = ops::view_as_real(self);
  ops::fill_(ops::select(pairs, -1, 0), value);
  ops::fill_(ops::select(pairs, -1, 1), Scalar(0.0));
  return self;
}

} // namespace kiln::kernels
