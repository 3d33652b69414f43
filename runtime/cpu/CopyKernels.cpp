// copy_ (broadcasting, converting between any two dtypes), _to_copy and clone.
#include "generated/KernelDecls.h"
#include "generated/Ops.h"
#include "runtime/cpu/Loops.h"
#include "runtime/cuda/CudaDriver.h"

namespace kiln::kernels {

namespace {

template <typename To, typename From> inline To convertValue(From v) {
  if constexpr (std::is_same_v<To, bool>) return static_cast<float>(v) != 0.0f || v != From(0);
  else if constexpr (std::is_same_v<From, Half> || std::is_same_v<From, BFloat16>)
    return static_cast<To>(static_cast<float>(v));
  else if constexpr (std::is_same_v<To, Half> || std::is_same_v<To, BFloat16>)
    return To(static_cast<float>(v));
  else return static_cast<To>(v);
}

// Writes src (any dtype, broadcast) into dst.
void copyInto(const Tensor& dst, const Tensor& src) {
  TensorIteratorConfig c;
  c.opName = "copy_";
  c.outputs = {dst};
  c.inputs = {src};
  c.castInputs = false;
  c.checkOutputCast = false;
  c.outputDtype = dst.dtype();
  c.computeDtype = dst.dtype();
  TensorIterator iter(std::move(c));
  KILN_DISPATCH_ALL(dst.dtype(), "copy_", [&]<typename scalar_t>() {
    using To = scalar_t;
    KILN_DISPATCH_ALL(src.dtype(), "copy_", [&]<typename From>() {
      cpu::cpuKernel(iter, [](From v) -> To { return convertValue<To, From>(v); });
    });
  });
}

} // namespace

Tensor copy_(const Tensor& self, const Tensor& src, bool nonBlocking) {
  if (self.isSame(src)) return self;
  copyInto(self, src);
  self.bumpVersion();
  return self;
}

Tensor toCopy(const Tensor& self, std::optional<ScalarType> dtype, std::optional<Device> device) {
  Device dev = device.value_or(self.device());
  if (dev.isCuda()) {
    // Host to device: the CUDA copy_ kernel (copy_ between devices dispatches to CUDA).
    cuda::requireCudaDriver("kiln.Tensor.to()");
    Tensor out = Tensor::empty(self.sizes(), dtype.value_or(self.dtype()), dev);
    KILN_CHECK(!self.isMeta() || out.numel() == 0, "Cannot copy out of meta tensor; no data!");
    return ops::copy_(out, self);
  }
  Tensor out = Tensor::empty(self.sizes(), dtype.value_or(self.dtype()), dev);
  if (!out.isMeta() && !self.isMeta()) copyInto(out, self);
  else KILN_CHECK(out.isMeta() || out.numel() == 0, "Cannot copy out of meta tensor; no data!");
  return out;
}

Tensor clone(const Tensor& self) {
  Tensor out = Tensor::empty(self.sizes(), self.dtype(), self.device());
  if (!self.isMeta()) copyInto(out, self);
  return out;
}

} // namespace kiln::kernels
