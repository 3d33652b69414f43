// View ops: new sizes/strides/offset over the same storage, never touching data (so they serve
// the Meta device unchanged). In-place variants (squeeze_, t_, ...) re-point self's geometry.
#include <cstdint>
#include <algorithm>
#include <bitset>

#include "generated/KernelDecls.h"
#include "runtime/ViewGeometry.h"

namespace kiln::kernels {

namespace {

constexpr size_t kMaxDims = 64;

Tensor restride(const Tensor& self, const Geometry& g) {
  return self.asStrided(g.sizes, g.strides, self.storageOffset());
}

void setGeometry(const Tensor& self, const Geometry& g) {
  self.impl()->setGeometry(g.sizes, g.strides, self.storageOffset());
}

// Dims in a list as a bitset; RuntimeError for repeats, IndexError for out-of-range dims.
std::bitset<kMaxDims> dimMask(IntArrayRef dims, int64_t ndim) {
  KILN_CHECK(ndim <= int64_t(kMaxDims), "only tensors with up to ", kMaxDims,
             " dims are supported");
  std::bitset<kMaxDims> mask;
  for (int64_t d : dims) {
    int64_t w = wrapDim(d, ndim);
    KILN_CHECK(!mask[size_t(w)], "dim ", w, " appears multiple times in the list of dims");
    mask.set(size_t(w));
  }
  return mask;
}

Geometry squeezeGeometry(const Tensor& self, const std::bitset<kMaxDims>& mask) {
  Geometry g;
  for (int64_t d = 0; d < self.dim(); ++d) {
    if (mask[size_t(d)] && self.sizes()[size_t(d)] == 1) continue;
    g.sizes.push_back(self.sizes()[size_t(d)]);
    g.strides.push_back(self.strides()[size_t(d)]);
  }
  return g;
}

std::bitset<kMaxDims> allDims(int64_t ndim) {
  KILN_CHECK(ndim <= int64_t(kMaxDims), "only tensors with up to ", kMaxDims,
             " dims are supported");
  std::bitset<kMaxDims> mask;
  for (int64_t d = 0; d < ndim; ++d)
    mask.set(size_t(d));
  return mask;
}

Geometry unsqueezeGeometry(const Tensor& self, int64_t dim) {
  dim = wrapDim(dim, self.dim() + 1);
  Geometry g{DimVector(self.sizes()), DimVector(self.strides())};
  int64_t stride = dim >= self.dim() ? 1 : g.sizes[size_t(dim)] * g.strides[size_t(dim)];
  g.sizes.insert(size_t(dim), 1);
  g.strides.insert(size_t(dim), stride);
  return g;
}

Geometry transposeGeometry(const Tensor& self, int64_t dim0, int64_t dim1) {
  int64_t n = self.dim();
  dim0 = wrapDim(dim0, n);
  dim1 = wrapDim(dim1, n);
  Geometry g{DimVector(self.sizes()), DimVector(self.strides())};
  if (n == 0) return g;
  std::swap(g.sizes[size_t(dim0)], g.sizes[size_t(dim1)]);
  std::swap(g.strides[size_t(dim0)], g.strides[size_t(dim1)]);
  return g;
}

void checkT(const Tensor& self) {
  KILN_CHECK(self.dim() <= 2, "t() expects a tensor with <= 2 dimensions, but self is ", self.dim(),
             "D");
}

} // namespace

Tensor view(const Tensor& self, IntArrayRef size) {
  DimVector shape = inferSize(size, self.numel());
  auto strides = computeViewStrides(self.sizes(), self.strides(), shape);
  KILN_CHECK(strides.has_value(),
             "view size is not compatible with input tensor's size and stride (at least one "
             "dimension spans across two contiguous subspaces). Use .reshape(...) instead.");
  return self.asStrided(shape, *strides, self.storageOffset());
}

Tensor permute(const Tensor& self, IntArrayRef dims) {
  int64_t n = self.dim();
  KILN_CHECK(int64_t(dims.size()) == n,
             "permute(sparse_coo): number of dimensions in the tensor input does not match the "
             "length of the desired ordering of dimensions i.e. input.dim() = ",
             n, " is not equal to len(dims) = ", dims.size());
  Geometry g{DimVector(size_t(n)), DimVector(size_t(n))};
  std::bitset<kMaxDims> seen;
  for (int64_t i = 0; i < n; ++i) {
    int64_t d = wrapDim(dims[size_t(i)], n);
    KILN_CHECK(!seen[size_t(d)], "permute(): duplicate dims are not allowed.");
    seen.set(size_t(d));
    g.sizes[size_t(i)] = self.sizes()[size_t(d)];
    g.strides[size_t(i)] = self.strides()[size_t(d)];
  }
  return restride(self, g);
}

Tensor transpose(const Tensor& self, int64_t dim0, int64_t dim1) {
  return restride(self, transposeGeometry(self, dim0, dim1));
}

Tensor transpose_(const Tensor& self, int64_t dim0, int64_t dim1) {
  setGeometry(self, transposeGeometry(self, dim0, dim1));
  return self;
}

Tensor t(const Tensor& self) {
  checkT(self);
  return transpose(self, 0, self.dim() < 2 ? 0 : 1);
}

Tensor t_(const Tensor& self) {
  checkT(self);
  return transpose_(self, 0, self.dim() < 2 ? 0 : 1);
}

Tensor squeeze(const Tensor& self) {
  return restride(self, squeezeGeometry(self, allDims(self.dim())));
}

Tensor squeezeDim(const Tensor& self, int64_t dim) {
  return restride(self, squeezeGeometry(self, dimMask({dim}, self.dim())));
}

Tensor squeezeDims(const Tensor& self, IntArrayRef dims) {
  return restride(self, squeezeGeometry(self, dimMask(dims, self.dim())));
}

Tensor squeeze_(const Tensor& self) {
  setGeometry(self, squeezeGeometry(self, allDims(self.dim())));
  return self;
}

Tensor squeezeDim_(const Tensor& self, int64_t dim) {
  setGeometry(self, squeezeGeometry(self, dimMask({dim}, self.dim())));
  return self;
}

Tensor squeezeDims_(const Tensor& self, IntArrayRef dims) {
  setGeometry(self, squeezeGeometry(self, dimMask(dims, self.dim())));
  return self;
}

Tensor unsqueeze(const Tensor& self, int64_t dim) {
  return restride(self, unsqueezeGeometry(self, dim));
}

Tensor unsqueeze_(const Tensor& self, int64_t dim) {
  setGeometry(self, unsqueezeGeometry(self, dim));
  return self;
}

Tensor expand(const Tensor& self, IntArrayRef size, bool implicit) {
  KILN_CHECK(size.size() >= size_t(self.dim()), "expand(", self.describe(),
             ", size=", shapeString(size), "): the number of sizes provided (", size.size(),
             ") must be greater or equal to the number of dimensions in the tensor (", self.dim(),
             ")");
  return restride(self, inferExpandGeometry(self.sizes(), self.strides(), size));
}

Tensor selectInt(const Tensor& self, int64_t dim, int64_t index) {
  KILN_CHECK_INDEX(self.dim() > 0, "select() cannot be applied to a 0-dim tensor.");
  dim = wrapDim(dim, self.dim());
  int64_t size = self.sizes()[size_t(dim)];
  KILN_CHECK_INDEX(index >= -size && index < size, "select(): index ", index,
                   " out of range for tensor of size ", self.shapeString(), " at dimension ", dim);
  if (index < 0) index += size;
  DimVector sizes(self.sizes()), strides(self.strides());
  int64_t offset = self.storageOffset() + index * strides[size_t(dim)];
  sizes.erase(size_t(dim));
  strides.erase(size_t(dim));
  return self.asStrided(sizes, strides, offset);
}

Tensor slice(const Tensor& self, int64_t dim, std::optional<int64_t> start,
             std::optional<int64_t> end, int64_t step) {
  KILN_CHECK_INDEX(self.dim() > 0, "slice() cannot be applied to a 0-dim tensor.");
  dim = wrapDim(dim, self.dim());
  KILN_CHECK(step > 0, "slice step must be positive");
  int64_t size = self.sizes()[size_t(dim)];
  int64_t s = start.value_or(0), e = end.value_or(INT64_MAX);
  if (s < 0) s += size;
  if (e < 0) e += size;
  s = std::clamp<int64_t>(s, 0, size);
  e = std::clamp<int64_t>(e, s, size);
  DimVector sizes(self.sizes()), strides(self.strides());
  int64_t offset = self.storageOffset() + s * strides[size_t(dim)];
  int64_t len = e - s;
  sizes[size_t(dim)] = len == 0 ? 0 : (len - 1) / step + 1;
  strides[size_t(dim)] *= step;
  return self.asStrided(sizes, strides, offset);
}

Tensor asStridedView(const Tensor& self, IntArrayRef size, IntArrayRef stride,
                     std::optional<int64_t> storageOffset) {
  int64_t offset = storageOffset.value_or(self.storageOffset());
  KILN_CHECK(size.size() == stride.size(), "mismatch in length of strides and shape");
  for (int64_t s : stride)
    KILN_CHECK(s >= 0,
               "as_strided: Negative strides are not supported at the moment, got strides: ",
               shapeString(stride));
  for (int64_t s : size)
    KILN_CHECK(s >= 0, "Trying to create tensor with negative dimension ", s, ": ",
               shapeString(size));
  KILN_CHECK(offset >= 0, "Tensor: invalid storage offset ", offset);
  int64_t itemsize = int64_t(elementSize(self.dtype()));
  int64_t needed = 0; // bytes the view reaches, 0 when it holds no elements
  if (computeNumel(size) > 0) {
    needed = 1;
    for (size_t d = 0; d < size.size(); ++d)
      needed += (size[d] - 1) * stride[d];
    needed = (needed + offset) * itemsize;
  }
  int64_t available = int64_t(self.storage()->nbytes());
  KILN_CHECK(needed <= available, "setStorage: sizes ", shapeString(size), ", strides ",
             shapeString(stride), ", storage offset ", offset, ", and itemsize ", itemsize,
             " requiring a storage size of ", needed, " are out of bounds for storage of size ",
             available);
  return self.asStrided(size, stride, offset);
}

// alias and detach: a new tensor object over the same data (detach's grad semantics live above).
Tensor alias(const Tensor& self) {
  return self.asStrided(self.sizes(), self.strides(), self.storageOffset());
}

// view_as_real / view_as_complex: the same bytes read as (re, im) pairs of the real value type
// (a trailing dim of 2 with stride 1, the other strides and the offset doubled), and back.
Tensor viewAsReal(const Tensor& self) {
  KILN_CHECK(isComplexType(self.dtype()), "view_as_real is only supported for complex tensors");
  DimVector sizes(self.sizes()), strides;
  for (int64_t s : self.strides())
    strides.push_back(2 * s);
  sizes.push_back(2);
  strides.push_back(1);
  auto impl = makeIntrusive<TensorImpl>(self.storage(), toRealValueType(self.dtype()),
                                        std::move(sizes), std::move(strides), 2 * self.storageOffset());
  return Tensor(std::move(impl));
}

Tensor viewAsComplex(const Tensor& self) {
  ScalarType t = self.dtype();
  KILN_CHECK(t == ScalarType::Float32 || t == ScalarType::Float64,
             "view_as_complex is only supported for float and double tensors, but got a tensor of "
             "scalar type: ", scalarTypeShortName(t));
  KILN_CHECK(self.dim() != 0, "Input tensor must have one or more dimensions");
  KILN_CHECK(self.sizes().back() == 2, "Tensor must have a last dimension of size 2");
  KILN_CHECK(self.strides().back() == 1, "Tensor must have a last dimension with stride 1");
  DimVector sizes(self.sizes()), strides;
  sizes.resize(sizes.size() - 1);
  for (size_t d = 0; d + 1 < size_t(self.dim()); ++d) {
    KILN_CHECK(self.strides()[d] % 2 == 0,
               "Tensor must have a stride divisible by 2 for all but last dimension");
    strides.push_back(self.strides()[d] / 2);
  }
  KILN_CHECK(self.storageOffset() % 2 == 0, "Tensor must have a storage_offset divisible by 2");
  auto impl = makeIntrusive<TensorImpl>(self.storage(), toComplexType(t), std::move(sizes),
                                        std::move(strides), self.storageOffset() / 2);
  return Tensor(std::move(impl));
}

} // namespace kiln::kernels
