// Automatic mixed precision (kiln.autocast, torch.amp.autocast): while autocast is on for a
// device type, the Autocast dispatch key casts the floating-point tensor arguments of listed
// ops before they run: GEMMs and convolutions to the lower-precision dtype (bfloat16 on CPU by
// default), precision-sensitive ops (losses, linear algebra, FFTs) to float32, and multi-input
// ops (cat, stack) to their widest input dtype. The op lists and the rules are PyTorch's
// (aten/src/ATen/autocast_mode.cpp), so a model gives the same dtypes as under torch.autocast.
//
// The casts are ordinary `_to_copy` calls made above the Tracing and Autograd keys: autograd
// records them (gradients come back in the parameters' dtype), and a graph traced under
// autocast holds them as ops, so compiled code needs no autocast state of its own.
#pragma once
#include <cstdint>

#include "runtime/Device.h"
#include "runtime/ScalarType.h"

namespace kiln {
class Dispatcher;
class Tensor;
}

namespace kiln::autocast {

// Autocast is kept per thread and per device type (CPU and CUDA), as in PyTorch.
bool isEnabled(DeviceType device);
void setEnabled(DeviceType device, bool on);
ScalarType dtype(DeviceType device);
void setDtype(DeviceType device, ScalarType dtype);

// The cast cache: lower-precision casts of float32 leaf parameters are made once per outermost
// autocast region (a weight read at every step of a loop is cast once, and its gradient is
// accumulated in the lower precision at that one cast, as in PyTorch).
bool isCacheEnabled();
void setCacheEnabled(bool on);
void clearCache();
// Depth of nested autocast regions (the Python context manager); leaving the outermost one
// clears the cache.
int incrementNesting();
int decrementNesting();

// The whole state (enabled and dtype per device type, cache flag) as one number: what a
// compiled frame guards on, since the casts traced into its graph depend on it.
uint32_t packedState();
void setPackedState(uint32_t packed);

// While a program is traced its tensors are fakes on the meta device: this resolver (set by
// the tracer) names the device a fake stands for, so that autocast("cpu") leaves the fakes of
// CUDA tensors alone; a fake it does not know counts as the device autocast is on for.
using FakeDeviceResolver = bool (*)(const Tensor& fake, DeviceType& device);
void setFakeDeviceResolver(FakeDeviceResolver resolver);

// Registers the Autocast dispatch key's fallback (called once by the dispatcher).
void registerAutocast(Dispatcher& d);

} // namespace kiln::autocast
