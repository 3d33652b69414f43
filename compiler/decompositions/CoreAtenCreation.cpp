// Non-core factories in core ATen ops (full, full_like, arange.start_step, empty, rand, randn),
// following torch/_refs. Device arguments left unset keep the op's default; a decomposition run
// while tracing may pass a fake's meta device, which the tracer maps back to the real one.
#include "compiler/decompositions/CoreAtenSupport.h"
#include "runtime/DefaultDtype.h"
#include "generated/DecompositionDecls.h"
#include <cstdint>

namespace kiln::decompositions {

// zeros / ones: full with a float fill, so an unset dtype is the default float dtype.
Tensor zeros(IntArrayRef size, std::optional<ScalarType> dtype, std::optional<Device> device) {
  return ops::full(size, Scalar(0.0), dtype, device);
}

Tensor ones(IntArrayRef size, std::optional<ScalarType> dtype, std::optional<Device> device) {
  return ops::full(size, Scalar(1.0), dtype, device);
}

Tensor zerosLike(const Tensor& self, std::optional<ScalarType> dtype, std::optional<Device> device) {
  return ops::full_like(self, Scalar(int64_t(0)), dtype, device);
}

Tensor onesLike(const Tensor& self, std::optional<ScalarType> dtype, std::optional<Device> device) {
  return ops::full_like(self, Scalar(int64_t(1)), dtype, device);
}

Tensor newEmpty(const Tensor& self, IntArrayRef size, std::optional<ScalarType> dtype,
                std::optional<Device> device) {
  return ops::empty(size, dtype.value_or(self.dtype()), device.value_or(self.device()));
}

Tensor newZeros(const Tensor& self, IntArrayRef size, std::optional<ScalarType> dtype,
                std::optional<Device> device) {
  return ops::full(size, Scalar(int64_t(0)), dtype.value_or(self.dtype()),
                   device.value_or(self.device()));
}

Tensor newOnes(const Tensor& self, IntArrayRef size, std::optional<ScalarType> dtype,
               std::optional<Device> device) {
  return ops::full(size, Scalar(int64_t(1)), dtype.value_or(self.dtype()),
                   device.value_or(self.device()));
}

Tensor newFull(const Tensor& self, IntArrayRef size, const Scalar& fillValue,
               std::optional<ScalarType> dtype, std::optional<Device> device) {
  return ops::full(size, fillValue, dtype.value_or(self.dtype()), device.value_or(self.device()));
}

Tensor arangeEnd(const Scalar& end, std::optional<ScalarType> dtype, std::optional<Device> device) {
  return ops::arangeStep(Scalar(int64_t(0)), end, Scalar(int64_t(1)), dtype, device);
}

Tensor arangeStart(const Scalar& start, const Scalar& end, std::optional<ScalarType> dtype,
                   std::optional<Device> device) {
  return ops::arangeStep(start, end, Scalar(int64_t(1)), dtype, device);
}

Tensor eye(int64_t n, std::optional<ScalarType> dtype, std::optional<Device> device) {
  return ops::eye(n, n, dtype, device);
}

// (arange(n)[:, None] == arange(m)) converted to the dtype (torch._refs.eye).
Tensor eyeM(int64_t n, int64_t m, std::optional<ScalarType> dtype, std::optional<Device> device) {
  Tensor rows = ops::arangeStep(Scalar(int64_t(0)), Scalar(n), Scalar(int64_t(1)),
                                ScalarType::Int64, device);
  Tensor cols = ops::arangeStep(Scalar(int64_t(0)), Scalar(m), Scalar(int64_t(1)),
                                ScalarType::Int64, device);
  Tensor cond = ops::eq(ops::unsqueeze(rows, -1), cols);
  return convert(cond, dtype.value_or(defaultFloatType()));
}

// fill_: a copy of a full tensor into self.
Tensor fill_(const Tensor& self, const Scalar& value) {
  return ops::copy_(self, ops::full_like(self, value), false);
}

Tensor randLike(const Tensor& self, std::optional<ScalarType> dtype, std::optional<Device> device) {
  return ops::rand(self.sizes(), dtype.value_or(self.dtype()), device.value_or(self.device()));
}

Tensor randnLike(const Tensor& self, std::optional<ScalarType> dtype, std::optional<Device> device) {
  return ops::randn(self.sizes(), dtype.value_or(self.dtype()), device.value_or(self.device()));
}

// Random draws from rand / randn, in the type and order the eager kernels draw them
// (runtime/cpu/RandomKernels.cpp), so a compiled graph draws the eager values: float32 uniforms
// against float probabilities (16-bit ones too), float64 ones against a scalar p (torch's
// bernoulli_distribution<double>). uniform_ is an affine map of a float draw (a double one for
// float64) rounded to self's dtype, normal_ one of randn in self's dtype: within an ulp of the
// eager kernels, which fuse the multiply-add.
namespace {
ScalarType drawType(const Tensor& self) {
  return self.dtype() == ScalarType::Float64 ? ScalarType::Float64 : ScalarType::Float32;
}
} // namespace

Tensor bernoulli(const Tensor& self) {
  return convert(ops::lt(ops::rand_like(self, drawType(self)), self), self.dtype());
}

Tensor bernoulliP(const Tensor& self, double p) {
  return convert(ops::lt(ops::rand_like(self, ScalarType::Float64), Scalar(p)), self.dtype());
}

Tensor bernoulliInplace(const Tensor& self, double p) {
  return ops::copy_(self, bernoulliP(self, p), false);
}

Tensor uniform_(const Tensor& self, double from, double to) {
  Tensor u = ops::rand_like(self, drawType(self));
  return ops::copy_(self, ops::add(ops::mul(u, Scalar(to - from)), Scalar(from)), false);
}

Tensor normal_(const Tensor& self, double mean, double std) {
  Tensor n = ops::randn_like(self); // same dtype: a 16-bit normal_ draws per block of 16
  return ops::copy_(self, ops::add(ops::mul(n, Scalar(std)), Scalar(mean)), false);
}

} // namespace kiln::decompositions
