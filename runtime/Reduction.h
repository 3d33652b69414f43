// Reductions over a set of dims: which dims (PyTorch's dim-list rules and errors), the result's
// shape, and the loop geometry that cpu/ReduceLoops.h runs: the input's dims split into kept
// (one per output element) and reduced, each ordered innermost-first by input stride and
// coalesced, so any strided input is walked in memory order.
#pragma once
#include <cstdint>
#include <optional>

#include "runtime/TensorImpl.h"

namespace kiln {

// Bit d set: dim d is reduced. Reductions support up to 64 dims, like PyTorch's.
using DimMask = uint64_t;

// The mask for `dims` of an ndim tensor. Dims are wrapped (IndexError when out of range) and a
// repeated dim is an error. No list, or an empty one when emptyMeansAll, reduces every dim.
DimMask makeDimMask(std::optional<IntArrayRef> dims, int64_t ndim, bool emptyMeansAll = true);

// The result sizes: reduced dims dropped, or kept with size 1.
DimVector reducedSizes(IntArrayRef sizes, DimMask mask, bool keepdim);

// A contiguous result of reducing `self` over `mask`, on self's device.
Tensor emptyReduction(const Tensor& self, DimMask mask, bool keepdim, ScalarType dtype);

// PyTorch's errors for reductions that have no identity (max, amin, argmax, ...) on empty input:
// `dimGiven` says whether the caller named the dims. Index ops (argmax) raise IndexError where
// value ops raise RuntimeError, as PyTorch does.
void checkReductionHasElements(const char* op, const Tensor& self, DimMask mask, bool dimGiven,
                               bool indexOp);

// The loop geometry of one reduction: one input, up to kMaxOutputs results of the reduced shape.
// Strides are in bytes. Dims of size 1 are dropped, so a plan may have no kept or no reduced dims.
struct ReductionPlan {
  static constexpr int kMaxOutputs = 2;

  const char* input = nullptr;
  char* outputs[kMaxOutputs] = {nullptr, nullptr};
  int numOutputTensors = 0;

  // Kept dims, innermost first: sizes, input strides, each output's strides.
  DimVector keptSizes, keptInputStrides;
  DimVector keptOutputStrides[kMaxOutputs];
  // Reduced dims, innermost first: sizes and input strides.
  DimVector reducedSizes, reducedStrides;

  int64_t numOutputs = 1;  // elements per output tensor
  int64_t reduceSize = 1;  // input elements per output element
  // The input's fastest-moving dim is reduced: each output reads runs along it. Otherwise the
  // loops read rows of neighbouring outputs at once.
  bool innerReduction = true;
};

// Plans reducing `input` over `mask` into `outputs` (already allocated with the reduced shape,
// keepdim or not). Data pointers are taken from the tensors; the plan does not own them.
ReductionPlan planReduction(const Tensor& input, DimMask mask, std::initializer_list<Tensor> outputs);

} // namespace kiln
