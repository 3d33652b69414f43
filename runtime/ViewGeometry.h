// Geometry of views: size inference for view/reshape, restriding without copies, expand's
// broadcast strides and the layout of an output that follows its input (PyTorch's rules).
#pragma once
#include <cstdint>
#include <optional>

#include "runtime/TensorImpl.h"

namespace kiln {

// Resolves one -1 in `shape` for a tensor of `numel` elements; RuntimeError as PyTorch words it
// when the shape does not fit.
DimVector inferSize(IntArrayRef shape, int64_t numel);

// Strides that view a tensor of (oldSizes, oldStrides) as newSizes without copying, or nothing
// when a dimension of the new shape would span non-contiguous memory (PyTorch's computeStride).
std::optional<DimVector> computeViewStrides(IntArrayRef oldSizes, IntArrayRef oldStrides,
                                            IntArrayRef newSizes);

struct Geometry {
  DimVector sizes, strides;
};
// The sizes and strides of `expand(sizes)`: broadcast dims get stride 0, -1 keeps a size.
Geometry inferExpandGeometry(IntArrayRef tensorSizes, IntArrayRef tensorStrides, IntArrayRef sizes);
// Can a tensor of `shape` be broadcast to `target` (without changing target)?
bool isExpandableTo(IntArrayRef shape, IntArrayRef target);

// Does (sizes, strides) cover a block of memory exactly once (in some dim order)?
bool isNonOverlappingAndDense(IntArrayRef sizes, IntArrayRef strides);
// Dense strides that keep the dim order of `strides` (PyTorch's infer_dense_strides).
DimVector inferDenseStrides(IntArrayRef sizes, IntArrayRef strides);
// Strides of 4-d or 5-d `sizes` stored channels-last (NHWC / NDHWC in memory).
DimVector channelsLastStrides(IntArrayRef sizes);
// Is `t` a 4-d or 5-d tensor stored densely channels-last and not also plain contiguous (one
// channel or a 1x1 image is both: it stays NCHW)? PyTorch's suggest_memory_format, which the
// kernels that keep their input's layout (convolution, batch norm) follow.
bool isChannelsLast(const Tensor& t);
// A new tensor shaped like `self` (PyTorch's empty_like with preserve_format): self's strides
// when self is dense, else dense strides in the order of self's.
Tensor emptyLikePreserve(const Tensor& self, ScalarType dtype);
// The same on another device.
Tensor emptyLikePreserve(const Tensor& self, ScalarType dtype, Device device);

} // namespace kiln
