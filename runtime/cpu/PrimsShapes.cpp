// View and shape prims: broadcast_in_dim, squeeze, transpose, slice, as_strided, view_of (views
// that never touch data, so they serve Meta as is), and reshape, rev, cat. Their arguments are
// fully explicit (no negative dims, no -1 sizes, no implicit broadcasting or promotion).
#include <cstdint>
#include <vector>

#include "generated/KernelDecls.h"
#include "runtime/ViewGeometry.h"

namespace kiln::kernels {

namespace {

void checkDim(const char* op, int64_t dim, int64_t ndim) {
  KILN_CHECK_INDEX(dim >= 0 && dim < ndim, op, ": dim ", dim, " is out of range for a tensor of ",
                   ndim, " dims (prims take non-negative dims)");
}

// Each dim of a list of dims is in range and named once.
void checkDims(const char* op, IntArrayRef dims, int64_t ndim) {
  std::vector<bool> seen(size_t(ndim), false);
  for (int64_t d : dims) {
    checkDim(op, d, ndim);
    KILN_CHECK(!seen[size_t(d)], op, ": dim ", d, " appears more than once in ", shapeString(dims));
    seen[size_t(d)] = true;
  }
}

void checkSizes(const char* op, IntArrayRef shape) {
  for (int64_t s : shape)
    KILN_CHECK(s >= 0, op, ": sizes must be non-negative, got ", shapeString(shape));
}

} // namespace

Tensor primsBroadcastInDim(const Tensor& a, IntArrayRef shape, IntArrayRef broadcastDimensions) {
  const char* op = "prims.broadcast_in_dim";
  checkSizes(op, shape);
  KILN_CHECK(int64_t(broadcastDimensions.size()) == a.dim(), op, ": broadcast_dimensions ",
             shapeString(broadcastDimensions), " must name one output dim per input dim (",
             a.dim(), ")");
  KILN_CHECK(shape.size() >= size_t(a.dim()), op, ": cannot broadcast ", a.shapeString(), " to ",
             shapeString(shape), " (fewer dims)");
  DimVector strides(shape.size(), 0);
  int64_t previous = -1;
  for (int64_t i = 0; i < a.dim(); ++i) {
    int64_t d = broadcastDimensions[size_t(i)];
    KILN_CHECK(d > previous && d < int64_t(shape.size()), op, ": broadcast_dimensions ",
               shapeString(broadcastDimensions), " must be increasing dims of the ", shape.size(),
               "-d result");
    previous = d;
    int64_t size = a.size(i);
    KILN_CHECK(size == shape[size_t(d)] || size == 1, op, ": input dim ", i, " of size ", size,
               " cannot broadcast to size ", shape[size_t(d)], " (input ", a.shapeString(),
               ", shape ", shapeString(shape), ")");
    strides[size_t(d)] = size == shape[size_t(d)] ? a.stride(i) : 0;
  }
  return a.asStrided(shape, strides, a.storageOffset());
}

Tensor primsSqueeze(const Tensor& a, IntArrayRef dimensions) {
  const char* op = "prims.squeeze";
  checkDims(op, dimensions, a.dim());
  std::vector<bool> drop(size_t(a.dim()), false);
  for (int64_t d : dimensions) {
    KILN_CHECK(a.size(d) == 1, op, ": dim ", d, " of a tensor of shape ", a.shapeString(),
               " has size ", a.size(d), ", not 1");
    drop[size_t(d)] = true;
  }
  DimVector sizes, strides;
  for (int64_t d = 0; d < a.dim(); ++d) {
    if (drop[size_t(d)]) continue;
    sizes.push_back(a.size(d));
    strides.push_back(a.stride(d));
  }
  return a.asStrided(sizes, strides, a.storageOffset());
}

Tensor primsTranspose(const Tensor& a, IntArrayRef permutation) {
  const char* op = "prims.transpose";
  KILN_CHECK(int64_t(permutation.size()) == a.dim(), op, ": permutation ",
             shapeString(permutation), " must name every dim of a ", a.dim(), "-d tensor");
  checkDims(op, permutation, a.dim());
  DimVector sizes, strides;
  for (int64_t d : permutation) {
    sizes.push_back(a.size(d));
    strides.push_back(a.stride(d));
  }
  return a.asStrided(sizes, strides, a.storageOffset());
}

Tensor primsSlice(const Tensor& a, IntArrayRef startIndices, IntArrayRef limitIndices,
                  std::optional<IntArrayRef> stepsArg) {
  const char* op = "prims.slice";
  size_t n = size_t(a.dim());
  KILN_CHECK(startIndices.size() == n && limitIndices.size() == n &&
                 (!stepsArg || stepsArg->size() == n),
             op, ": start_indices, limit_indices and strides must have one entry per dim of ",
             a.shapeString());
  DimVector sizes(n), strides(n);
  int64_t offset = a.storageOffset();
  for (size_t d = 0; d < n; ++d) {
    int64_t start = startIndices[d], limit = limitIndices[d];
    int64_t step = stepsArg ? (*stepsArg)[d] : 1;
    KILN_CHECK(0 <= start && start <= limit && limit <= a.sizes()[d], op, ": dim ", d,
               " of a tensor of shape ", a.shapeString(), " cannot be sliced [", start, ", ",
               limit, ")");
    KILN_CHECK(step > 0, op, ": strides must be positive, got ", step);
    sizes[d] = (limit - start + step - 1) / step;
    strides[d] = a.strides()[d] * step;
    if (sizes[d] > 0) offset += start * a.strides()[d];
  }
  return a.asStrided(sizes, strides, offset);
}

Tensor primsAsStrided(const Tensor& a, IntArrayRef size, IntArrayRef stride,
                      int64_t storageOffset) {
  return asStridedView(a, size, stride, storageOffset);
}

Tensor primsViewOf(const Tensor& a) { return alias(a); }

Tensor primsReshape(const Tensor& a, IntArrayRef shape) {
  const char* op = "prims.reshape";
  checkSizes(op, shape);
  KILN_CHECK(computeNumel(shape) == a.numel(), op, ": shape ", shapeString(shape),
             " is invalid for input of size ", a.numel());
  return reshape(a, shape);
}

Tensor primsRev(const Tensor& a, IntArrayRef dims) {
  checkDims("prims.rev", dims, a.dim());
  return flip(a, dims);
}

Tensor primsCat(const std::vector<Tensor>& tensors, int64_t dim) {
  const char* op = "prims.cat";
  KILN_CHECK(!tensors.empty(), op, ": expected a non-empty list of tensors");
  const Tensor& first = tensors.front();
  checkDim(op, dim, first.dim());
  for (const Tensor& t : tensors) {
    KILN_CHECK(t.dtype() == first.dtype(), op,
               ": tensors must have equal dtypes (prims do not promote), got ",
               scalarTypeName(first.dtype()), " and ", scalarTypeName(t.dtype()));
    KILN_CHECK(t.dim() == first.dim(), op, ": tensors must have equal ranks, got ",
               first.shapeString(), " and ", t.shapeString());
    for (int64_t d = 0; d < t.dim(); ++d)
      KILN_CHECK(d == dim || t.size(d) == first.size(d), op, ": sizes must match except in dim ",
                 dim, ", got ", first.shapeString(), " and ", t.shapeString());
  }
  return cat(tensors, dim);
}

} // namespace kiln::kernels
