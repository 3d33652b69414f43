// copy_ moves bytes with one driver copy when source and destination have the same dtype and the
// same dense layout; anything else (a dtype change, broadcasting, a strided view) goes through
// host staging: the device side's storage span is downloaded, the CPU copy kernel converts, and
// the destination's span is uploaded again. Slow but exact; generated kernels will replace it.
#include "runtime/cuda/CudaTensorKernels.h"

#include <cstdint>
#include <atomic>

#include <cstring>

#include "generated/Ops.h"
#include "runtime/Dispatcher.h"
#include "runtime/Error.h"
#include "runtime/TensorImpl.h"
#include "runtime/ViewGeometry.h"
#include "runtime/cuda/CudaDevice.h"
#include "runtime/cuda/CudaDriver.h"
#include "runtime/cuda/CudaMemory.h"

namespace kiln::cuda {
namespace {

const Device kCpu(DeviceType::CPU);

// Elements from element [0, ...] to the last one a tensor can address (strides are >= 0).
int64_t spanElements(const Tensor& t) {
  if (t.numel() == 0) return 0;
  int64_t extent = 1;
  for (int64_t d = 0; d < t.dim(); ++d) extent += (t.size(d) - 1) * t.stride(d);
  return extent;
}

bool isDense(const Tensor& t) { return isNonOverlappingAndDense(t.sizes(), t.strides()); }

CudaStream streamFor(const Tensor& t) { return currentStream(t.device().index); }

// A host copy of the device memory `t` can address, viewed with t's geometry.
Tensor downloadSpan(const Tensor& t) {
  Tensor host = Tensor::empty({spanElements(t)}, t.dtype(), kCpu);
  copyDeviceToHost(host.rawData(), t.rawData(), size_t(host.numel()) * elementSize(t.dtype()),
                   streamFor(t));
  return host.asStrided(t.sizes(), t.strides(), 0);
}

// Writes back a host view made by downloadSpan (or a fresh host tensor of t's dense layout).
void uploadSpan(const Tensor& hostView, const Tensor& t) {
  size_t bytes = size_t(spanElements(t)) * elementSize(t.dtype());
  copyHostToDevice(t.rawData(), hostView.storage()->data(), bytes, streamFor(t));
}

// A host tensor to write t's new contents into: a dense t is overwritten whole, so it needs no
// download; otherwise the bytes between its elements must survive the upload.
Tensor hostStagingFor(const Tensor& t) {
  if (isDense(t)) {
    Tensor host = Tensor::empty({spanElements(t)}, t.dtype(), kCpu);
    return host.asStrided(t.sizes(), t.strides(), 0);
  }
  return downloadSpan(t);
}

Tensor hostReadable(const Tensor& t) {
  KILN_CHECK(!t.isMeta(), "copy_: cannot copy out of meta tensor; no data!");
  return t.device().isCuda() ? downloadSpan(t) : t;
}

Tensor cudaCopy(const Tensor& self, const Tensor& src) {
  if (self.isSame(src)) return self;
  KILN_CHECK(!self.isMeta(), "copy_: cannot copy into a meta tensor from ", src.device().str());
  if (self.numel() == 0) return self;
  bool sameLayout = self.dtype() == src.dtype() && self.sizes() == src.sizes() &&
                    self.strides() == src.strides() && isDense(self) && !src.isMeta();
  if (sameLayout) {
    size_t bytes = size_t(self.numel()) * elementSize(self.dtype());
    if (self.device().isCuda() && src.device().isCuda())
      copyDeviceToDevice(self.rawData(), src.rawData(), bytes, streamFor(self));
    else if (self.device().isCuda())
      copyHostToDevice(self.rawData(), src.rawData(), bytes, streamFor(self));
    else
      copyDeviceToHost(self.rawData(), src.rawData(), bytes, streamFor(src));
  } else if (self.device().isCuda()) {
    // Read the source before touching the destination: they may share memory.
    Tensor srcHost = hostReadable(src);
    Tensor dstHost = hostStagingFor(self);
    ops::copy_(dstHost, srcHost);
    uploadSpan(dstHost, self);
  } else {
    ops::copy_(self, hostReadable(src));
  }
  self.bumpVersion();
  return self;
}

void boxedCopy(Stack& s) {
  Tensor r = cudaCopy(s[0].toTensor(), s[1].toTensor());
  s.clear();
  s.emplace_back(std::move(r));
}

// The element bit pattern of `value` as `dtype` (CPU fill_ does the range checks).
uint64_t bitPattern(const Scalar& value, ScalarType dtype) {
  Tensor one = Tensor::empty({}, dtype, kCpu);
  ops::fill_(one, value);
  uint64_t bits = 0;
  std::memcpy(&bits, one.rawData(), elementSize(dtype));
  return bits;
}

Tensor cudaFill(const Tensor& self, const Scalar& value) {
  uint64_t bits = bitPattern(value, self.dtype());
  size_t esize = elementSize(self.dtype());
  if (self.numel() == 0) return self;
  if (isDense(self) && esize <= 4) {
    fillDevice(self.rawData(), uint32_t(bits), esize, size_t(self.numel()), streamFor(self));
  } else if (isDense(self) && uint32_t(bits) == uint32_t(bits >> 32)) {
    // An 8-byte pattern whose halves agree (0, -1, ...) is a 4-byte fill of twice the count.
    fillDevice(self.rawData(), uint32_t(bits), 4, 2 * size_t(self.numel()), streamFor(self));
  } else {
    Tensor host = hostStagingFor(self);
    ops::fill_(host, value);
    uploadSpan(host, self);
  }
  self.bumpVersion();
  return self;
}

void boxedFill(Stack& s) {
  Tensor r = cudaFill(s[0].toTensor(), s[1].toScalar());
  s.clear();
  s.emplace_back(std::move(r));
}

void boxedToCopy(Stack& s) {
  Tensor self = s[0].toTensor();
  ScalarType dtype = s[1].isNone() ? self.dtype() : s[1].toOptional<ScalarType>().value();
  Device device = s[2].isNone() ? self.device() : s[2].toDevice();
  // PyTorch's memory_format=preserve, as the CPU kernel: a channels-last tensor stays one.
  Tensor out = emptyLikePreserve(self, dtype, device);
  if (!device.isMeta()) cudaCopy(out, self);
  s.clear();
  s.emplace_back(std::move(out));
}

void boxedClone(Stack& s) {
  Tensor self = s[0].toTensor();
  Tensor out = Tensor::empty(self.sizes(), self.dtype(), self.device());
  cudaCopy(out, self);
  s.clear();
  s.emplace_back(std::move(out));
}

int deviceArgument(const OpSchema& schema) {
  for (size_t i = 0; i < schema.args.size(); ++i)
    if (schema.args[i].type == ArgType::Device) return int(i);
  return -1;
}

// A factory on CUDA: the CPU kernel computes the values on the host (tensor arguments of
// factories give only geometry), then they are uploaded with the same strides.
void stagedFactory(OpId op, Stack& stack) {
  const Dispatcher& d = Dispatcher::instance();
  const OpSchema& schema = d.schema(op);
  int devArg = deviceArgument(schema);
  Device target;
  if (devArg >= 0 && !stack[size_t(devArg)].isNone()) {
    target = stack[size_t(devArg)].toDevice();
    // zeros_like(cuda_tensor, device="cpu"): the CPU kernel takes only geometry from self.
    if (target.isCpu()) return d.redispatch(op, DispatchKeySet(DispatchKey::CPU), stack);
  }
  if (!target.isCuda())
    for (const Value& v : stack)
      if (v.isTensor() && v.toTensor().defined() && v.toTensor().device().isCuda())
        target = v.toTensor().device();
  KILN_CHECK(devArg >= 0 && target.isCuda(), "kiln.", schema.name,
             "(): no CUDA device to create on");
  std::string what = strCat("kiln.", schema.name, "()");
  target.index = int8_t(resolveDeviceIndex(target, what));
  stack[size_t(devArg)] = Value(kCpu);
  d.redispatch(op, DispatchKeySet(DispatchKey::CPU), stack);
  Tensor host = stack.back().toTensor();
  Tensor out = Tensor::emptyStrided(host.sizes(), host.strides(), host.dtype(), target);
  cudaCopy(out, host);
  stack.back() = Value(out);
}

std::atomic<CudaEagerHook> eagerHook{nullptr};

// Ops with no CUDA kernel: factories are staged through the host; anything else runs a kernel
// generated from its decomposition (the eager hook), or is refused clearly.
void cudaFallback(OpId op, DispatchKeySet, Stack& stack) {
  const OpSchema& schema = Dispatcher::instance().schema(op);
  if (schema.hasTag(kTagCreation)) return stagedFactory(op, stack);
  if (CudaEagerHook hook = eagerHook.load(); hook && hook(op, stack)) return;
  throw NotImplementedError(strCat(
      "kiln.", schema.qualifiedName(),
      ": no CUDA kernel (CUDA tensors run creation, copies, views, fill_ and .to()/.cpu() here; every "
      "other op runs a kernel generated by kiln's Python layer, kiln.compiler.cuda_eager, which is "
      "not loaded)"));
}

// empty/empty_strided on CUDA: the CPU kernel (it only allocates, through Tensor::emptyStrided)
// after checking that CUDA is there, so that the error names the op the user called.
template <OpId Op> void allocatingKernel(Stack& s) {
  const Dispatcher& d = Dispatcher::instance();
  requireCudaDriver(strCat("kiln.", d.schema(Op).name, "()"));
  d.kernel(Op, DispatchKey::CPU)(s);
}

} // namespace

void setCudaEagerHook(CudaEagerHook hook) { eagerHook.store(hook); }

void registerCudaTensorKernels(Dispatcher& d) {
  // View kernels shared by CPU and Meta only compute geometry: valid for CUDA tensors as is.
  for (size_t i = 0; i < d.numOps(); ++i) {
    OpId op = OpId(i);
    BoxedKernel cpu = d.kernel(op, DispatchKey::CPU);
    if (d.schema(op).hasTag(kTagView) && cpu && cpu == d.kernel(op, DispatchKey::Meta))
      d.registerKernel(op, DispatchKey::CUDA, cpu);
  }
  // prims.reshape is no view op (it copies strides that cannot be viewed), but its CPU kernel
  // only checks and composes ops that dispatch (view, contiguous: a CUDA clone): valid for CUDA
  // tensors as is. (Without it, an eager view graph of a program on CUDA reshaping an input came
  // back to the eager hook, whose program is that view graph again.)
  d.registerKernel(OpId::prims_reshape, DispatchKey::CUDA, d.kernel(OpId::prims_reshape, DispatchKey::CPU));
  d.registerKernel(OpId::empty, DispatchKey::CUDA, allocatingKernel<OpId::empty>);
  d.registerKernel(OpId::empty_strided, DispatchKey::CUDA, allocatingKernel<OpId::empty_strided>);
  d.registerKernel(OpId::prims_empty_strided, DispatchKey::CUDA,
                   allocatingKernel<OpId::prims_empty_strided>);
  d.registerKernel(OpId::copy_, DispatchKey::CUDA, boxedCopy);
  d.registerKernel(OpId::fill__Scalar, DispatchKey::CUDA, boxedFill);
  d.registerKernel(OpId::_to_copy, DispatchKey::CUDA, boxedToCopy);
  d.registerKernel(OpId::clone, DispatchKey::CUDA, boxedClone);
  d.registerFallback(DispatchKey::CUDA, cudaFallback);
}

} // namespace kiln::cuda
