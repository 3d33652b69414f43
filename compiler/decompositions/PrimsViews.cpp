// Core ATen -> Prims: views (view, permute, squeeze, unsqueeze, expand, select, slice,
// as_strided, alias) as the view prims with explicit, non-negative arguments, the shape ops
// built from them (cat, repeat, flip), after torch/_refs, and the scatters into slices/selects.
#include <cstdint>
#include <algorithm>

#include "compiler/decompositions/PrimsCommon.h"
#include "generated/DecompositionDecls.h"
#include "generated/KernelDecls.h"
#include "runtime/TensorIterator.h"
#include "runtime/ViewGeometry.h"

namespace kiln::decompositions {

namespace P = kiln::ops::prims;

namespace {

// A slice of one dim, [start, limit) with a stride, as prims.slice's per-dim lists.
Tensor sliceDim(const Tensor& a, int64_t dim, int64_t start, int64_t limit, int64_t step = 1) {
  DimVector starts(size_t(a.dim()), 0), limits(a.sizes()), steps(size_t(a.dim()), 1);
  starts[size_t(dim)] = start;
  limits[size_t(dim)] = limit;
  steps[size_t(dim)] = step;
  return P::slice(a, starts, limits, steps);
}

// The dims of `shape` that `t` maps to when right-aligned (broadcast_in_dim's argument).
std::vector<int64_t> trailingDims(const Tensor& t, size_t rank) {
  std::vector<int64_t> dims;
  for (int64_t i = 0; i < t.dim(); ++i)
    dims.push_back(int64_t(rank) - t.dim() + i);
  return dims;
}

} // namespace

Tensor view(const Tensor& self, IntArrayRef size) {
  DimVector shape = inferSize(size, self.numel());
  KILN_CHECK(computeViewStrides(self.sizes(), self.strides(), shape).has_value(),
             "view size is not compatible with input tensor's size and stride (at least one "
             "dimension spans across two contiguous subspaces). Use .reshape(...) instead.");
  // Viewable, so prims.reshape makes a view.
  return P::reshape(self, shape);
}

Tensor permute(const Tensor& self, IntArrayRef dims) {
  KILN_CHECK(int64_t(dims.size()) == self.dim(),
             "permute(sparse_coo): number of dimensions in the tensor input does not match the "
             "length of the desired ordering of dimensions i.e. input.dim() = ",
             self.dim(), " is not equal to len(dims) = ", dims.size());
  std::vector<int64_t> perm;
  for (int64_t d : dims) {
    int64_t w = wrapDim(d, self.dim());
    KILN_CHECK(std::find(perm.begin(), perm.end(), w) == perm.end(), "permute(): duplicate dims are not allowed.");
    perm.push_back(w);
  }
  return P::transpose(self, perm);
}

Tensor squeezeDims(const Tensor& self, IntArrayRef dim) {
  std::vector<int64_t> dims;
  for (int64_t d : dim) {
    int64_t w = wrapDim(d, std::max<int64_t>(self.dim(), 1));
    if (self.dim() > 0 && self.size(w) == 1 &&
        std::find(dims.begin(), dims.end(), w) == dims.end())
      dims.push_back(w);
  }
  std::sort(dims.begin(), dims.end());
  return dims.empty() ? P::view_of(self) : P::squeeze(self, dims);
}

Tensor squeezeDim(const Tensor& self, int64_t dim) { return squeezeDims(self, IntArrayRef{dim}); }

Tensor unsqueeze(const Tensor& self, int64_t dim) {
  int64_t d = wrapDim(dim, self.dim() + 1);
  DimVector shape(self.sizes());
  shape.insert(size_t(d), 1);
  std::vector<int64_t> dims;
  for (int64_t i = 0; i < self.dim(); ++i)
    dims.push_back(i < d ? i : i + 1);
  return P::broadcast_in_dim(self, shape, dims);
}

Tensor expand(const Tensor& self, IntArrayRef size, bool implicit) {
  KILN_CHECK(size.size() >= size_t(self.dim()), "expand(", self.describe(),
             ", size=", shapeString(size), "): the number of sizes provided (", size.size(),
             ") must be greater or equal to the number of dimensions in the tensor (", self.dim(),
             ")");
  DimVector shape = inferExpandGeometry(self.sizes(), self.strides(), size).sizes;
  return P::broadcast_in_dim(self, shape, trailingDims(self, shape.size()));
}

Tensor selectInt(const Tensor& self, int64_t dim, int64_t index) {
  KILN_CHECK_INDEX(self.dim() > 0, "select() cannot be applied to a 0-dim tensor.");
  int64_t d = wrapDim(dim, self.dim());
  int64_t size = self.size(d);
  KILN_CHECK_INDEX(index >= -size && index < size, "select(): index ", index,
                   " out of range for tensor of size ", self.shapeString(), " at dimension ", d);
  if (index < 0) index += size;
  return P::squeeze(sliceDim(self, d, index, index + 1), std::vector<int64_t>{d});
}

Tensor slice(const Tensor& self, int64_t dim, std::optional<int64_t> start,
             std::optional<int64_t> end, int64_t step) {
  KILN_CHECK_INDEX(self.dim() > 0, "slice() cannot be applied to a 0-dim tensor.");
  int64_t d = wrapDim(dim, self.dim());
  KILN_CHECK(step > 0, "slice step must be positive");
  int64_t size = self.size(d);
  int64_t s = start.value_or(0), e = end.value_or(INT64_MAX);
  if (s < 0) s += size;
  if (e < 0) e += size;
  s = std::clamp<int64_t>(s, 0, size);
  e = std::clamp<int64_t>(e, s, size);
  return sliceDim(self, d, s, e, step);
}

Tensor asStridedView(const Tensor& self, IntArrayRef size, IntArrayRef stride,
                     std::optional<int64_t> storageOffset) {
  return P::as_strided(self, size, stride, storageOffset.value_or(self.storageOffset()));
}

Tensor alias(const Tensor& self) { return P::view_of(self); }

// Operands promoted to their result type; PyTorch's legacy rule skips 1-d empty tensors.
Tensor cat(const std::vector<Tensor>& tensors, int64_t dim) {
  KILN_CHECK(!tensors.empty(), "torch.cat(): expected a non-empty list of Tensors");
  std::vector<Tensor> kept;
  for (const Tensor& t : tensors)
    if (!(t.dim() == 1 && t.size(0) == 0)) kept.push_back(t);
  ScalarType dtype = resultType(tensors);
  if (kept.empty()) return P::full(tensors[0].sizes(), 0, dtype, tensors[0].device());
  int64_t d = wrapDim(dim, kept[0].dim());
  for (Tensor& t : kept)
    t = convert(t, dtype);
  return P::cat(kept, d);
}


// The input broadcast to [r0, s0, r1, s1, ...] and reshaped to [r0 s0, r1 s1, ...].
Tensor repeat(const Tensor& self, IntArrayRef repeats) {
  KILN_CHECK(
      repeats.size() >= size_t(self.dim()),
      "Number of dimensions of repeat dims can not be smaller than number of dimensions of tensor");
  size_t n = repeats.size(), lead = n - size_t(self.dim());
  DimVector interleaved, target;
  std::vector<int64_t> dims;
  for (size_t i = 0; i < n; ++i) {
    KILN_CHECK(repeats[i] >= 0, "Trying to create tensor with negative dimension ", repeats[i],
               ": ", shapeString(repeats));
    int64_t s = i < lead ? 1 : self.size(int64_t(i - lead));
    interleaved.push_back(repeats[i]);
    interleaved.push_back(s);
    target.push_back(repeats[i] * s);
    if (i >= lead) dims.push_back(int64_t(2 * i + 1));
  }
  return P::reshape(P::broadcast_in_dim(self, interleaved, dims), target);
}

Tensor flip(const Tensor& self, IntArrayRef dims) {
  std::vector<int64_t> wrapped;
  for (int64_t d : dims) {
    int64_t w = wrapDim(d, std::max<int64_t>(self.dim(), 1));
    KILN_CHECK(std::find(wrapped.begin(), wrapped.end(), w) == wrapped.end(), "dim ", w,
               " appears multiple times in the list of dims");
    if (self.dim() > 0) wrapped.push_back(w);
  }
  return P::rev(self, wrapped);
}

// The scatters' kernels are written in ops (clone, the view, copy_): traced, they are these ops,
// which decompose in turn (copy_ into the view of the clone becomes prims.copy_to).
Tensor sliceScatter(const Tensor& self, const Tensor& src, int64_t dim, std::optional<int64_t> start,
                    std::optional<int64_t> end, int64_t step) {
  return kernels::sliceScatter(self, src, dim, start, end, step);
}

Tensor selectScatter(const Tensor& self, const Tensor& src, int64_t dim, int64_t index) {
  return kernels::selectScatter(self, src, dim, index);
}

} // namespace kiln::decompositions
