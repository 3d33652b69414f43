// copy_ (broadcasting, converting between any two dtypes), _to_copy and clone.
#include <omp.h>

#include <cstring>

#include "generated/KernelDecls.h"
#include "generated/Ops.h"
#include "runtime/cpu/Loops.h"
#include "runtime/ViewGeometry.h"
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

// Tiles of kTile x kTile elements: read along src's columns and written along dst's rows,
// both stay in L1 (a plain element loop walks one of them with a stride of a whole row).
constexpr int64_t kTile = 32;
constexpr int64_t kTransposeParallelGrain = 1 << 16;

template <typename T>
void transposeTiles(char* dstBytes, const char* srcBytes, int64_t batches, int64_t rows, int64_t cols,
                    const std::vector<int64_t>& batchOffsets, int64_t ld) {
  int64_t tileRows = (rows + kTile - 1) / kTile, tileCols = (cols + kTile - 1) / kTile;
  int64_t tiles = batches * tileRows * tileCols;
#pragma omp parallel for schedule(static) if (batches * rows * cols > kTransposeParallelGrain && !omp_in_parallel())
  for (int64_t t = 0; t < tiles; ++t) {
    int64_t b = t / (tileRows * tileCols), r0 = (t / tileCols) % tileRows * kTile, c0 = t % tileCols * kTile;
    auto* dst = reinterpret_cast<T*>(dstBytes) + b * rows * cols;
    const auto* src = reinterpret_cast<const T*>(srcBytes) + batchOffsets[size_t(b)];
    int64_t r1 = std::min(rows, r0 + kTile), c1 = std::min(cols, c0 + kTile);
    for (int64_t c = c0; c < c1; ++c)
      for (int64_t r = r0; r < r1; ++r)
        dst[r * cols + c] = src[c * ld + r];
  }
}

// dst = src for a contiguous dst and a src of the same dtype and sizes whose last two dims are
// swapped in memory (x.t().contiguous(), a transpose(-2, -1) of attention heads): src's
// element (.., r, c) sits at c * ld + r of its batch. False when src is not laid out so.
bool copyTransposed(const Tensor& dst, const Tensor& src) {
  int64_t dim = src.dim();
  if (dim < 2 || dst.dtype() != src.dtype() || dst.sizes() != src.sizes() || !dst.isContiguous() ||
      dst.device().type != DeviceType::CPU || src.device().type != DeviceType::CPU ||
      dst.storage()->data() == src.storage()->data()) // overlapping copies keep the element loop
    return false;
  int64_t rows = src.size(dim - 2), cols = src.size(dim - 1), ld = src.stride(dim - 1);
  if (rows < kTile || cols < kTile || src.stride(dim - 2) != 1 || ld < rows) return false;
  int64_t batches = src.numel() / (rows * cols);
  std::vector<int64_t> batchOffsets(static_cast<size_t>(batches));
  for (int64_t b = 0; b < batches; ++b) { // the batch's first element, row-major over the batch dims
    int64_t rest = b, offset = 0;
    for (int64_t d = dim - 3; d >= 0; --d) {
      offset += rest % src.size(d) * src.stride(d);
      rest /= src.size(d);
    }
    batchOffsets[size_t(b)] = offset;
  }
  char* out = dst.rawData();
  const char* in = src.rawData();
  switch (elementSize(src.dtype())) {
  case 1: transposeTiles<uint8_t>(out, in, batches, rows, cols, batchOffsets, ld); return true;
  case 2: transposeTiles<uint16_t>(out, in, batches, rows, cols, batchOffsets, ld); return true;
  case 4: transposeTiles<uint32_t>(out, in, batches, rows, cols, batchOffsets, ld); return true;
  case 8: transposeTiles<uint64_t>(out, in, batches, rows, cols, batchOffsets, ld); return true;
  default: return false;
  }
}

// Writes src (any dtype, broadcast) into dst.
void copyInto(const Tensor& dst, const Tensor& src) {
  if (copyTransposed(dst, src)) return;
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

// PyTorch's assert_no_partial_overlap: two dense tensors whose memory intersects without being
// the same elements in the same order (a.copy_(a[0])) cannot be copied elementwise. Layouts
// that are not dense are not checked (PyTorch calls them too hard to decide, and copies).
void checkNoPartialOverlap(const Tensor& self, const Tensor& src) {
  if (self.numel() == 0 || src.numel() == 0 || self.isMeta() || src.isMeta()) return;
  if (self.device() != src.device()) return;
  if (!isNonOverlappingAndDense(self.sizes(), self.strides()) ||
      !isNonOverlappingAndDense(src.sizes(), src.strides()))
    return;
  const char* selfBegin = self.rawData();
  const char* selfEnd = selfBegin + self.numel() * int64_t(elementSize(self.dtype()));
  const char* srcBegin = src.rawData();
  const char* srcEnd = srcBegin + src.numel() * int64_t(elementSize(src.dtype()));
  if (selfBegin == srcBegin && selfEnd == srcEnd && self.strides() == src.strides()) return;
  KILN_CHECK(!(selfBegin < srcEnd && srcBegin < selfEnd),
             "copy_: unsupported operation: some elements of the input tensor and the written-to "
             "tensor refer to a single memory location. Please clone() the tensor before "
             "performing the operation. (destination ", scalarTypeName(self.dtype()),
             self.shapeString(), ", source ", scalarTypeName(src.dtype()), src.shapeString(), ")");
}

} // namespace

Tensor copy_(const Tensor& self, const Tensor& src, bool nonBlocking) {
  if (self.isSame(src)) return self;
  checkNoPartialOverlap(self, src);
  copyInto(self, src);
  self.bumpVersion();
  return self;
}

// PyTorch's memory_format=preserve: a dense tensor (channels-last, transposed) keeps its
// strides, any other gets dense strides in the order of its own.
Tensor toCopy(const Tensor& self, std::optional<ScalarType> dtype, std::optional<Device> device) {
  Device dev = device.value_or(self.device());
  if (dev.isCuda()) {
    // Host to device: the CUDA copy_ kernel (copy_ between devices dispatches to CUDA).
    cuda::requireCudaDriver("kiln.Tensor.to()");
    Tensor out = emptyLikePreserve(self, dtype.value_or(self.dtype()), dev);
    KILN_CHECK(!self.isMeta() || out.numel() == 0, "Cannot copy out of meta tensor; no data!");
    return ops::copy_(out, self);
  }
  Tensor out = emptyLikePreserve(self, dtype.value_or(self.dtype()), dev);
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
