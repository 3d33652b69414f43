// View ops written in other view ops: reshape (a view when the strides allow, else a copy),
// flatten/unflatten, narrow, movedim, swapdims and the *_as forms.
#include <cstdint>
#include <algorithm>
#include <numeric>

#include "generated/KernelDecls.h"
#include "generated/Ops.h"
#include "runtime/ViewGeometry.h"

namespace kiln::kernels {

Tensor reshape(const Tensor& self, IntArrayRef shape) {
  DimVector size = inferSize(shape, self.numel());
  if (computeViewStrides(self.sizes(), self.strides(), size)) return ops::view(self, size);
  return ops::view(ops::contiguous(self), size);
}

Tensor reshapeAs(const Tensor& self, const Tensor& other) {
  return ops::reshape(self, other.sizes());
}

Tensor viewAs(const Tensor& self, const Tensor& other) { return ops::view(self, other.sizes()); }

Tensor expandAs(const Tensor& self, const Tensor& other) {
  return ops::expand(self, other.sizes());
}

Tensor swapdims(const Tensor& self, int64_t dim0, int64_t dim1) {
  return ops::transpose(self, dim0, dim1);
}

Tensor flatten(const Tensor& self, int64_t startDim, int64_t endDim) {
  startDim = wrapDim(startDim, self.dim());
  endDim = wrapDim(endDim, self.dim());
  KILN_CHECK(startDim <= endDim, "flatten() has invalid args: start_dim cannot come after end_dim");
  if (self.dim() == 0) return ops::reshape(self, {1});
  if (startDim == endDim) return self;
  DimVector shape;
  for (int64_t d = 0; d < startDim; ++d)
    shape.push_back(self.sizes()[size_t(d)]);
  int64_t flat = 1;
  for (int64_t d = startDim; d <= endDim; ++d)
    flat *= self.sizes()[size_t(d)];
  shape.push_back(flat);
  for (int64_t d = endDim + 1; d < self.dim(); ++d)
    shape.push_back(self.sizes()[size_t(d)]);
  return ops::reshape(self, shape);
}

Tensor unflatten(const Tensor& self, int64_t dim, IntArrayRef sizes) {
  dim = wrapDim(dim, self.dim());
  KILN_CHECK(self.dim() > 0, "unflatten got an unexpected error:\nDimension specified as ", dim,
             " but tensor has no dimensions");
  KILN_CHECK(!sizes.empty(), "unflatten: sizes must be non-empty");
  int64_t extent = self.sizes()[size_t(dim)];
  DimVector inferred;
  try {
    inferred = inferSize(sizes, extent);
  } catch (const Error&) {
    throw Error(kiln::strCat("unflatten: Provided sizes ", shapeString(sizes), " don't multiply up to the size of dim ",
                       dim, " (", extent, ") in the input tensor"));
  }
  DimVector shape;
  for (int64_t d = 0; d < dim; ++d)
    shape.push_back(self.sizes()[size_t(d)]);
  for (int64_t s : inferred)
    shape.push_back(s);
  for (int64_t d = dim + 1; d < self.dim(); ++d)
    shape.push_back(self.sizes()[size_t(d)]);
  return ops::view(self, shape);
}

Tensor narrow(const Tensor& self, int64_t dim, int64_t start, int64_t length) {
  KILN_CHECK(self.dim() > 0, "narrow() cannot be applied to a 0-dim tensor.");
  KILN_CHECK(length >= 0, "narrow(): length must be non-negative.");
  int64_t size = self.size(dim);
  KILN_CHECK_INDEX(start >= -size && start <= size,
                   "start out of range (expected to be in range of [", -size, ", ", size,
                   "], but got ", start, ")");
  if (start < 0) start += size;
  KILN_CHECK(start <= size - length, "start (", start, ") + length (", length,
             ") exceeds dimension size (", size, ").");
  return ops::slice(self, dim, start, start + length, 1);
}

Tensor movedim(const Tensor& self, IntArrayRef source, IntArrayRef destination) {
  KILN_CHECK(source.size() == destination.size(),
             "movedim: Invalid source or destination dims: source (", shapeString(source),
             " dims) should contain the same number of dims as destination (",
             shapeString(destination), " dims)");
  int64_t n = self.dim();
  auto wrapAll = [n](IntArrayRef dims, const char* what) {
    std::vector<int64_t> out;
    for (int64_t d : dims)
      out.push_back(wrapDim(d, n));
    std::vector<int64_t> sorted = out;
    std::sort(sorted.begin(), sorted.end());
    KILN_CHECK(std::adjacent_find(sorted.begin(), sorted.end()) == sorted.end(),
               "movedim: repeated dim in `", what, "` (", shapeString(dims), ")");
    return out;
  };
  std::vector<int64_t> src = wrapAll(source, "source"), dst = wrapAll(destination, "destination");
  if (n == 0) return ops::alias(self);
  // Place the named dims first, then fill the free positions with the other dims in order.
  const auto count = static_cast<size_t>(n);
  std::vector<int64_t> order(count, -1), restSrc(count), restDst(count);
  std::iota(restSrc.begin(), restSrc.end(), 0);
  std::iota(restDst.begin(), restDst.end(), 0);
  for (size_t i = 0; i < src.size(); ++i) {
    order[size_t(dst[i])] = src[i];
    restSrc[size_t(src[i])] = -1;
    restDst[size_t(dst[i])] = -1;
  }
  restSrc.erase(std::remove(restSrc.begin(), restSrc.end(), -1), restSrc.end());
  restDst.erase(std::remove(restDst.begin(), restDst.end(), -1), restDst.end());
  for (size_t i = 0; i < restSrc.size(); ++i)
    order[size_t(restDst[i])] = restSrc[i];
  return ops::permute(self, order);
}

Tensor movedimInt(const Tensor& self, int64_t source, int64_t destination) {
  return movedim(self, {source}, {destination});
}

} // namespace kiln::kernels
