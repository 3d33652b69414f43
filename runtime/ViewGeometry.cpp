// Size inference, view restriding and expand geometry (ports of PyTorch's InferSize.h,
// computeStride and inferExpandGeometry).
#include "runtime/ViewGeometry.h"

#include <cstdint>
#include <algorithm>
#include <numeric>
#include <vector>

namespace kiln {

DimVector inferSize(IntArrayRef shape, int64_t numel) {
  DimVector out(shape);
  int64_t known = 1;
  std::optional<size_t> inferred;
  for (size_t d = 0; d < shape.size(); ++d) {
    if (shape[d] == -1) {
      KILN_CHECK(!inferred, "only one dimension can be inferred");
      inferred = d;
    } else {
      KILN_CHECK(shape[d] >= 0, "invalid shape dimension ", shape[d], " at index ", d, " of shape ",
                 shapeString(shape));
      known *= shape[d];
    }
  }
  bool fits = numel == known || (inferred && known > 0 && numel % known == 0);
  KILN_CHECK(fits, "shape '", shapeString(shape), "' is invalid for input of size ", numel);
  if (inferred) {
    KILN_CHECK(known != 0, "cannot reshape tensor of 0 elements into shape ", shapeString(shape),
               " because the unspecified dimension size -1 can be any value and is ambiguous");
    out[*inferred] = numel / known;
  }
  return out;
}

std::optional<DimVector> computeViewStrides(IntArrayRef oldSizes, IntArrayRef oldStrides,
                                            IntArrayRef newSizes) {
  if (oldSizes.empty()) return DimVector(newSizes.size(), 1);
  int64_t numel = computeNumel(oldSizes);
  if (numel == 0 && oldSizes == newSizes) return DimVector(oldStrides);
  int64_t nNew = int64_t(newSizes.size());
  DimVector newStrides(newSizes.size());
  if (numel == 0) {
    for (int64_t d = nNew - 1; d >= 0; --d) {
      newStrides[size_t(d)] =
          d == nNew - 1 ? 1
                        : std::max<int64_t>(newSizes[size_t(d + 1)], 1) * newStrides[size_t(d + 1)];
    }
    return newStrides;
  }
  // Walk both shapes from the back, matching "chunks" of old dims that are contiguous with
  // each other to runs of new dims with the same number of elements.
  int64_t viewD = nNew - 1;
  int64_t chunkBaseStride = oldStrides.back();
  int64_t tensorNumel = 1, viewNumel = 1;
  for (int64_t d = int64_t(oldSizes.size()) - 1; d >= 0; --d) {
    tensorNumel *= oldSizes[size_t(d)];
    bool chunkEnds = d == 0 || (oldSizes[size_t(d - 1)] != 1 &&
                                oldStrides[size_t(d - 1)] != tensorNumel * chunkBaseStride);
    if (!chunkEnds) continue;
    while (viewD >= 0 && (viewNumel < tensorNumel || newSizes[size_t(viewD)] == 1)) {
      newStrides[size_t(viewD)] = viewNumel * chunkBaseStride;
      viewNumel *= newSizes[size_t(viewD)];
      --viewD;
    }
    if (viewNumel != tensorNumel) return std::nullopt;
    if (d > 0) {
      chunkBaseStride = oldStrides[size_t(d - 1)];
      tensorNumel = 1;
      viewNumel = 1;
    }
  }
  if (viewD != -1) return std::nullopt;
  return newStrides;
}

Geometry inferExpandGeometry(IntArrayRef tensorSizes, IntArrayRef tensorStrides,
                             IntArrayRef sizes) {
  int64_t ndim = int64_t(sizes.size());
  int64_t tensorDim = int64_t(tensorSizes.size());
  KILN_CHECK(ndim >= tensorDim, "expand: the number of sizes provided (", ndim,
             ") must be greater or equal to the number of dimensions in the tensor (", tensorDim,
             ")");
  Geometry g{DimVector(size_t(ndim)), DimVector(size_t(ndim))};
  if (tensorDim == 0) { // a 0-d tensor broadcasts everywhere: every stride is 0
    for (int64_t i = 0; i < ndim; ++i) {
      KILN_CHECK(sizes[size_t(i)] >= 0, "The expanded size of the tensor (", sizes[size_t(i)],
                 ") isn't allowed in a leading, non-existing dimension ", i);
      g.sizes[size_t(i)] = sizes[size_t(i)];
    }
    return g;
  }
  for (int64_t i = ndim - 1; i >= 0; --i) {
    int64_t dim = tensorDim - 1 - (ndim - 1 - i);
    int64_t size = dim >= 0 ? tensorSizes[size_t(dim)] : 1;
    int64_t stride =
        dim >= 0 ? tensorStrides[size_t(dim)] : g.sizes[size_t(i + 1)] * g.strides[size_t(i + 1)];
    int64_t target = sizes[size_t(i)];
    if (target == -1) {
      KILN_CHECK(dim >= 0,
                 "The expanded size of the tensor (-1) isn't allowed in a leading, "
                 "non-existing dimension ",
                 i);
      target = size;
    }
    KILN_CHECK(target >= 0, "Trying to create tensor with negative dimension ", target, ": ",
               shapeString(sizes));
    if (size != target) {
      KILN_CHECK(size == 1, "The expanded size of the tensor (", target,
                 ") must match the existing size (", size, ") at non-singleton dimension ", i,
                 ".  Target sizes: ", shapeString(sizes),
                 ".  Tensor sizes: ", shapeString(tensorSizes));
      size = target;
      stride = 0;
    }
    g.sizes[size_t(i)] = size;
    g.strides[size_t(i)] = stride;
  }
  return g;
}

bool isExpandableTo(IntArrayRef shape, IntArrayRef target) {
  if (shape.size() > target.size()) return false;
  size_t lead = target.size() - shape.size();
  for (size_t i = 0; i < shape.size(); ++i)
    if (shape[i] != target[lead + i] && shape[i] != 1) return false;
  return true;
}

bool isNonOverlappingAndDense(IntArrayRef sizes, IntArrayRef strides) {
  std::vector<size_t> perm(sizes.size());
  std::iota(perm.begin(), perm.end(), 0);
  // Size-1 (and empty) dims last: their strides do not matter.
  std::sort(perm.begin(), perm.end(), [&](size_t a, size_t b) {
    if (sizes[a] < 2) return false;
    if (sizes[b] < 2) return true;
    return strides[a] < strides[b];
  });
  int64_t required = 1;
  for (size_t d : perm) {
    if (sizes[d] < 2) return true;
    if (strides[d] != required) return false;
    required *= sizes[d];
  }
  return true;
}

DimVector inferDenseStrides(IntArrayRef sizes, IntArrayRef strides) {
  size_t ndim = sizes.size();
  // perm[0] is the innermost dim. Insertion sort from the reversed identity, as TensorIterator
  // orders dims: smaller stride inside, equal strides put the smaller size inside, and a 0
  // stride makes the comparison ambiguous (the dim stays where it is).
  std::vector<size_t> perm(ndim);
  for (size_t i = 0; i < ndim; ++i)
    perm[i] = ndim - 1 - i;
  auto shouldSwap = [&](size_t a, size_t b) {
    if (strides[a] == 0 || strides[b] == 0) return 0;
    if (strides[a] != strides[b]) return strides[a] < strides[b] ? -1 : 1;
    return sizes[a] > sizes[b] ? 1 : 0;
  };
  for (size_t i = 1; i < ndim; ++i) {
    size_t dim1 = i;
    for (size_t j = 1; j <= i; ++j) {
      size_t dim0 = i - j;
      int c = shouldSwap(perm[dim0], perm[dim1]);
      if (c > 0) {
        std::swap(perm[dim0], perm[dim1]);
        dim1 = dim0;
      } else if (c < 0) {
        break;
      }
    }
  }
  DimVector out(ndim);
  int64_t stride = 1;
  for (size_t d : perm) {
    out[d] = stride;
    if (sizes[d] > 1) stride *= sizes[d];
  }
  return out;
}

Tensor emptyLikePreserve(const Tensor& self, ScalarType dtype) {
  return emptyLikePreserve(self, dtype, self.device());
}

Tensor emptyLikePreserve(const Tensor& self, ScalarType dtype, Device device) {
  bool dense = self.isContiguous() || isNonOverlappingAndDense(self.sizes(), self.strides());
  DimVector strides =
      dense ? DimVector(self.strides()) : inferDenseStrides(self.sizes(), self.strides());
  return Tensor::emptyStrided(self.sizes(), strides, dtype, device);
}

DimVector channelsLastStrides(IntArrayRef sizes) {
  const size_t rank = sizes.size();
  DimVector strides(rank);
  int64_t step = sizes[1];
  strides[1] = 1;
  for (size_t d = rank - 1; d >= 2; --d) {
    strides[d] = step;
    step *= sizes[d];
  }
  strides[0] = step;
  return strides;
}

bool isChannelsLast(const Tensor& t) {
  if ((t.dim() != 4 && t.dim() != 5) || t.isContiguous()) return false;
  DimVector want = channelsLastStrides(t.sizes());
  for (int64_t d = 0; d < t.dim(); ++d)
    if (t.size(d) != 1 && t.stride(d) != want[size_t(d)]) return false;
  return true;
}

} // namespace kiln
