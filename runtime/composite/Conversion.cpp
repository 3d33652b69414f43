// to(...), contiguous, zero_: written in terms of other ops.
#include "generated/KernelDecls.h"
#include "generated/Ops.h"
#include <cstdint>

namespace kiln::kernels {

Tensor toOptions(const Tensor& self, std::optional<ScalarType> dtype, std::optional<Device> device,
                 bool nonBlocking, bool copy) {
  ScalarType dt = dtype.value_or(self.dtype());
  Device dev = device.value_or(self.device());
  bool sameDevice = dev.type == self.device().type &&
                    (dev.index < 0 || self.device().index < 0 || dev.index == self.device().index);
  if (!copy && dt == self.dtype() && sameDevice) return self;
  return ops::_to_copy(self, dt, dev);
}

Tensor toDtype(const Tensor& self, ScalarType dtype, bool nonBlocking, bool copy) {
  return toOptions(self, dtype, std::nullopt, nonBlocking, copy);
}

Tensor toDevice(const Tensor& self, Device device, std::optional<ScalarType> dtype, bool nonBlocking,
                bool copy) {
  return toOptions(self, dtype, device, nonBlocking, copy);
}

Tensor toOther(const Tensor& self, const Tensor& other, bool nonBlocking, bool copy) {
  return toOptions(self, other.dtype(), other.device(), nonBlocking, copy);
}

Tensor contiguous(const Tensor& self) { return self.isContiguous() ? self : ops::clone(self); }

Tensor zero_(const Tensor& self) { return ops::fill_(self, Scalar(int64_t(0))); }

} // namespace kiln::kernels
