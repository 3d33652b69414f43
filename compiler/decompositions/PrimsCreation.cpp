// Core ATen -> Prims: factories (empty, empty_strided, full, scalar_tensor, empty_like,
// full_like, arange, rand, randn) as prims.empty_strided / full / iota / uniform / normal with
// the dtype and device defaults resolved, and copies (_to_copy, clone) as
// convert_element_type / device_put / clone, and copy_ as prims.copy_to.
#include "compiler/decompositions/PrimsCommon.h"
#include "generated/DecompositionDecls.h"
#include "generated/KernelDecls.h"
#include "runtime/ViewGeometry.h"
#include <cstdint>

namespace kiln::decompositions {

namespace P = kiln::ops::prims;

namespace {

// full's dtype when none is given: that of the fill value (float: the default dtype).
ScalarType fillDtype(const Scalar& value) {
  return value.isBool() ? ScalarType::Bool
         : value.isIntegral() ? ScalarType::Int64
                              : defaultFloat();
}

// empty_like's layout: the input's strides when it is dense, else contiguous.
DimVector likeStrides(const Tensor& self) {
  if (isNonOverlappingAndDense(self.sizes(), self.strides()))
    return inferDenseStrides(self.sizes(), self.strides());
  return contiguousStrides(self.sizes());
}

} // namespace

Tensor empty(IntArrayRef size, std::optional<ScalarType> dtype, std::optional<Device> device) {
  for (int64_t s : size)
    KILN_CHECK(s >= 0, "Trying to create tensor with negative dimension ", s, ": ",
               shapeString(size));
  return P::empty_strided(size, contiguousStrides(size), dtype.value_or(defaultFloat()),
                          device.value_or(Device()));
}

Tensor emptyStrided(IntArrayRef size, IntArrayRef stride, std::optional<ScalarType> dtype,
                    std::optional<Device> device) {
  return P::empty_strided(size, stride, dtype.value_or(defaultFloat()), device.value_or(Device()));
}

Tensor full(IntArrayRef size, const Scalar& fillValue, std::optional<ScalarType> dtype,
            std::optional<Device> device) {
  return P::full(size, fillValue, dtype.value_or(fillDtype(fillValue)), device.value_or(Device()));
}

Tensor scalarTensor(const Scalar& s, std::optional<ScalarType> dtype, std::optional<Device> device) {
  return P::full({}, s, dtype.value_or(defaultFloat()), device.value_or(Device()));
}

// empty_like is not core ATen (PyTorch's tag): it decomposes to core empty_strided, whose own
// decomposition reaches prims.empty_strided.
Tensor emptyLike(const Tensor& self, std::optional<ScalarType> dtype, std::optional<Device> device) {
  return ops::empty_strided(self.sizes(), likeStrides(self), dtype.value_or(self.dtype()),
                            device.value_or(self.device()));
}

Tensor fullLike(const Tensor& self, const Scalar& fillValue, std::optional<ScalarType> dtype,
                std::optional<Device> device) {
  return P::full(self.sizes(), fillValue, dtype.value_or(self.dtype()),
                 device.value_or(self.device()));
}

// Integer dtypes: prims.iota. Floats: start + step * iota in double (PyTorch's CPU accumulate
// type; float for the 16-bit floats), then converted (torch/_refs arange).
Tensor arangeStartStep(const Scalar& start, const Scalar& end, const Scalar& step,
                       std::optional<ScalarType> dtype, std::optional<Device> device) {
  bool anyFloat = start.isFloating() || end.isFloating() || step.isFloating();
  ScalarType dt = dtype.value_or(anyFloat ? defaultFloat() : ScalarType::Int64);
  // The eager kernel on meta checks the arguments and computes the length, touching no data.
  int64_t length =
      kernels::arangeStartStep(start, end, step, dt, Device(DeviceType::Meta)).size(0);
  Device dev = device.value_or(Device());
  // Integer dtypes step in int64 from the truncated start and step, as the eager kernel does.
  if (isIntegralType(dt, false)) return P::iota(length, start.toInt(), step.toInt(), dt, dev);
  ScalarType acc = computationDtype(dt) == dt ? ScalarType::Float64 : ScalarType::Float32;
  Tensor index = convert(P::iota(length, 0, 1, ScalarType::Int64, dev), acc);
  Tensor values = P::add(filledLike(index, start), P::mul(filledLike(index, step), index));
  return convert(values, dt);
}

Tensor rand(IntArrayRef size, std::optional<ScalarType> dtype, std::optional<Device> device) {
  return P::uniform(size, 0.0, 1.0, dtype.value_or(defaultFloat()), device.value_or(Device()));
}

Tensor randn(IntArrayRef size, std::optional<ScalarType> dtype, std::optional<Device> device) {
  return P::normal(size, 0.0, 1.0, dtype.value_or(defaultFloat()), device.value_or(Device()));
}

Tensor toCopy(const Tensor& self, std::optional<ScalarType> dtype, std::optional<Device> device) {
  Tensor out = dtype && *dtype != self.dtype() ? P::convert_element_type(self, *dtype) : P::clone(self);
  if (device && *device != self.device()) out = P::device_put(out, *device);
  return out;
}

Tensor clone(const Tensor& self) { return P::clone(self); }

// src converted to self's dtype and broadcast to its shape, written by the in-place prim.
Tensor copy_(const Tensor& self, const Tensor& src, bool nonBlocking) {
  Tensor value = materialize(Operand(src), self.dtype(), self.device(), self.sizes());
  if (Operand(src).tensor && src.device() != self.device())
    value = P::device_put(value, self.device());
  return P::copy_to(self, value);
}

} // namespace kiln::decompositions
