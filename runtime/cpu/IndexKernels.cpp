// Indexing kernels: advanced indexing (index, index_put_), index_select, gather, masked_fill.
// Gathers and scatters run on TensorIterator over restrided views, as PyTorch's AdvancedIndex
// does: the indexed dims of the source get stride 0 and each element adds index * stride.
#include <cstdint>
#include <algorithm>
#include <cstring>

#include "generated/KernelDecls.h"
#include "generated/Ops.h"
#include "runtime/CheckedConvert.h"
#include "runtime/MaskIndex.h"
#include "runtime/TensorIterator.h"
#include "runtime/ViewGeometry.h"
#include "runtime/cpu/IndexLoops.h"

namespace kiln::kernels {

namespace {

// Calls f with an unsigned integer type of `size` bytes: moving elements needs only their bytes.
template <typename F> void dispatchBySize(size_t size, const F& f) {
  switch (size) {
  case 1:
    return f.template operator()<uint8_t>();
  case 2:
    return f.template operator()<uint16_t>();
  case 4:
    return f.template operator()<uint32_t>();
  default:
    return f.template operator()<uint64_t>();
  }
}

// One index operand of an indexed copy: int64 values (broadcastable to the iteration shape)
// choosing positions along a dim of `size` elements, `stride` elements apart.
struct IndexOperand {
  Tensor values;
  int64_t size;
  int64_t stride;
};

enum class IndexedSide { Source, Destination };

// Gather: dst[i] = src[i + offset(i)]; scatter: dst[i + offset(i)] = src[i] (or +=), with
// offset(i) = sum_k wrap(index_k[i]) * stride_k. Index values are bounds-checked by the caller
// (the loop runs in parallel regions and must not throw).
void indexedCopy(const char* op, const Tensor& dst, const Tensor& src,
                 const std::vector<IndexOperand>& indices, IndexedSide side, bool accumulate) {
  TensorIteratorConfig c;
  c.opName = op;
  c.outputs = {dst};
  c.inputs = {src};
  for (const IndexOperand& ix : indices)
    c.inputs.push_back(ix.values);
  c.keepInputDtype.assign(c.inputs.size(), true);
  c.castInputs = false;
  c.checkOutputCast = false;
  c.computeDtype = dst.dtype();
  c.outputDtype = dst.dtype();
  TensorIterator iter(std::move(c));
  if (iter.isMeta() || iter.numel() == 0) return;
  size_t k = indices.size();
  int64_t item = int64_t(elementSize(dst.dtype()));
  std::vector<int64_t> sizes(k), byteStrides(k);
  for (size_t j = 0; j < k; ++j) {
    sizes[j] = indices[j].size;
    byteStrides[j] = indices[j].stride * item;
  }
  auto offsetAt = [&](char** data, const int64_t* st, int64_t i) {
    int64_t off = 0;
    for (size_t j = 0; j < k; ++j) {
      int64_t v = *reinterpret_cast<const int64_t*>(data[2 + j] + i * st[2 + j]);
      off += (v < 0 ? v + sizes[j] : v) * byteStrides[j];
    }
    return off;
  };
  // Scatters run serially so that with repeated indices the last write wins (and sums are exact).
  constexpr int64_t kSerial = INT64_MAX;
  if (accumulate) {
    KILN_DISPATCH_ALL(dst.dtype(), op, [&]<typename T>() {
      iter.forEach(
          [&](char** data, const int64_t* st, int64_t n) {
            for (int64_t i = 0; i < n; ++i) {
              T* d = reinterpret_cast<T*>(data[0] + i * st[0] + offsetAt(data, st, i));
              T v = *reinterpret_cast<const T*>(data[1] + i * st[1]);
              if constexpr (std::is_same_v<T, bool>)
                *d = *d || v;
              else
                *d = T(opmath_t<T>(*d) + opmath_t<T>(v));
            }
          },
          kSerial);
    });
    return;
  }
  dispatchBySize(size_t(item), [&]<typename T>() {
    if (side == IndexedSide::Source) {
      iter.forEach([&](char** data, const int64_t* st, int64_t n) {
        for (int64_t i = 0; i < n; ++i)
          *reinterpret_cast<T*>(data[0] + i * st[0]) =
              *reinterpret_cast<const T*>(data[1] + i * st[1] + offsetAt(data, st, i));
      });
    } else {
      iter.forEach(
          [&](char** data, const int64_t* st, int64_t n) {
            for (int64_t i = 0; i < n; ++i)
              *reinterpret_cast<T*>(data[0] + i * st[0] + offsetAt(data, st, i)) =
                  *reinterpret_cast<const T*>(data[1] + i * st[1]);
          },
          kSerial);
    }
  });
}

Tensor toInt64(const Tensor& t) { return ops::_to_copy(t, ScalarType::Int64, std::nullopt); }

// The int64 coordinates of the true elements of a bool/uint8 mask, one tensor per mask dim.
std::vector<Tensor> maskCoordinates(const Tensor& mask) {
  KILN_CHECK(
      !mask.isMeta(),
      "boolean mask indexing has a data-dependent result shape; it cannot run on the meta device");
  Tensor m = ops::contiguous(mask);
  const uint8_t* p = reinterpret_cast<const uint8_t*>(m.rawData());
  int64_t n = m.numel(), nnz = 0;
  for (int64_t i = 0; i < n; ++i)
    nnz += p[i] != 0;
  size_t k = size_t(m.dim());
  std::vector<Tensor> coords;
  std::vector<int64_t*> out;
  for (size_t j = 0; j < k; ++j) {
    coords.push_back(Tensor::empty({nnz}, ScalarType::Int64, m.device()));
    out.push_back(coords.back().data<int64_t>());
  }
  DimVector idx(k, 0);
  int64_t w = 0;
  for (int64_t i = 0; i < n; ++i) {
    if (p[i]) {
      for (size_t j = 0; j < k; ++j)
        out[j][w] = idx[j];
      ++w;
    }
    for (size_t j = k; j-- > 0;) {
      if (++idx[j] < m.sizes()[j]) break;
      idx[j] = 0;
    }
  }
  return coords;
}

void checkIndexBounds(const Tensor& values, int64_t size, int64_t dim) {
  if (values.isMeta()) return;
  const int64_t* p = values.data<int64_t>();
  for (int64_t i = 0; i < values.numel(); ++i)
    KILN_CHECK_INDEX(p[i] >= -size && p[i] < size, "index ", p[i],
                     " is out of bounds for dimension ", dim, " with size ", size);
}

// PyTorch's AdvancedIndex: self with its indexed dims made adjacent (moved to the front when they
// are not) and restrided to the result shape, plus the index operands.
struct AdvancedIndex {
  Tensor src;
  std::vector<IndexOperand> indices;
};

std::optional<AdvancedIndex> makeAdvancedIndex(const Tensor& self,
                                               const std::vector<std::optional<Tensor>>& orig) {
  KILN_CHECK_INDEX(orig.size() <= size_t(self.dim()), "too many indices for tensor of dimension ",
                   self.dim(), " (got ", orig.size(), ")");
  for (const auto& ix : orig) {
    if (!ix || !ix->defined()) continue;
    ScalarType t = ix->dtype();
    KILN_CHECK_INDEX(t == ScalarType::Int64 || t == ScalarType::Int32 || t == ScalarType::UInt8 ||
                         t == ScalarType::Bool,
                     "tensors used as indices must be long, int, byte or bool tensors");
  }
  // Masks become the coordinates of their true elements, one index per mask dim.
  std::vector<Tensor> indices;
  for (const auto& ix : orig) {
    if (!ix || !ix->defined()) {
      indices.emplace_back();
      continue;
    }
    ScalarType t = ix->dtype();
    if (t != ScalarType::Bool && t != ScalarType::UInt8) {
      indices.push_back(*ix);
      continue;
    }
    size_t first = indices.size();
    for (int64_t j = 0; j < ix->dim(); ++j) {
      int64_t at = int64_t(first) + j;
      KILN_CHECK_INDEX(at < self.dim() && ix->sizes()[size_t(j)] == self.sizes()[size_t(at)],
                       "The shape of the mask ", ix->shapeString(), " at index ", j,
                       " does not match the shape of the indexed tensor ", self.shapeString(),
                       " at index ", at);
    }
    for (Tensor& c : maskCoordinates(*ix))
      indices.push_back(std::move(c));
  }
  KILN_CHECK_INDEX(indices.size() <= size_t(self.dim()),
                   "too many indices for tensor of dimension ", self.dim(), " (got ",
                   indices.size(), ")");
  DimVector shape;
  bool any = false;
  try {
    for (const Tensor& t : indices) {
      if (!t.defined()) continue;
      shape = any ? broadcastShapes("index", shape, t.sizes()) : DimVector(t.sizes());
      any = true;
    }
  } catch (const Error&) {
    std::string shapes;
    for (const Tensor& t : indices)
      if (t.defined()) shapes += (shapes.empty() ? "" : ", ") + t.shapeString();
    throw IndexError(
        "shape mismatch: indexing tensors could not be broadcast together with shapes " + shapes);
  }
  if (!any) return std::nullopt;
  while (indices.size() < size_t(self.dim()))
    indices.emplace_back();
  // Non-adjacent indexed dims go to the front, in order (numpy's rule).
  auto firstDef =
      std::find_if(indices.begin(), indices.end(), [](const Tensor& t) { return t.defined(); });
  auto lastDef = std::find_if(indices.rbegin(), indices.rend(), [](const Tensor& t) {
                   return t.defined();
                 }).base();
  bool adjacent = std::all_of(firstDef, lastDef, [](const Tensor& t) { return t.defined(); });
  Tensor src = self;
  if (!adjacent) {
    std::vector<int64_t> order;
    std::vector<Tensor> reordered;
    for (int pass = 0; pass < 2; ++pass) {
      for (size_t d = 0; d < indices.size(); ++d) {
        if (indices[d].defined() != (pass == 0)) continue;
        order.push_back(int64_t(d));
        reordered.push_back(indices[d]);
      }
    }
    src = ops::permute(self, order);
    indices = std::move(reordered);
  }
  int64_t before = 0, after = 0;
  std::vector<size_t> indexedDims;
  for (size_t d = 0; d < indices.size(); ++d) {
    if (indices[d].defined())
      indexedDims.push_back(d);
    else if (indexedDims.empty())
      ++before;
    else
      ++after;
  }
  bool emptyIndexedDim = false;
  for (size_t d : indexedDims)
    emptyIndexedDim |= src.sizes()[d] == 0;
  KILN_CHECK_INDEX(!emptyIndexedDim || computeNumel(shape) == 0,
                   "index is out of bounds for dimension with size 0");
  DimVector resultSizes, resultStrides;
  for (int64_t d = 0; d < before; ++d) {
    resultSizes.push_back(src.sizes()[size_t(d)]);
    resultStrides.push_back(src.strides()[size_t(d)]);
  }
  for (int64_t s : shape) {
    resultSizes.push_back(s);
    resultStrides.push_back(0);
  }
  for (size_t d = indices.size() - size_t(after); d < indices.size(); ++d) {
    resultSizes.push_back(src.sizes()[d]);
    resultStrides.push_back(src.strides()[d]);
  }
  AdvancedIndex info;
  info.src = src.asStrided(resultSizes, resultStrides, src.storageOffset());
  DimVector indexerShape(size_t(before), 1);
  for (int64_t s : shape)
    indexerShape.push_back(s);
  for (int64_t d = 0; d < after; ++d)
    indexerShape.push_back(1);
  for (size_t j = 0; j < indexedDims.size(); ++j) {
    size_t d = indexedDims[j];
    Tensor values = toInt64(ops::expand(indices[d], shape, false));
    // Like PyTorch, indices are only checked when they address something.
    if (computeNumel(resultSizes) > 0) checkIndexBounds(values, src.sizes()[d], int64_t(j));
    info.indices.push_back({ops::view(values, indexerShape), src.sizes()[d], src.strides()[d]});
  }
  return info;
}

void checkMask(const Tensor& mask) {
  KILN_CHECK(mask.dtype() == ScalarType::Bool,
             "masked_fill_ only supports boolean masks, but got mask with dtype ",
             scalarTypeName(mask.dtype()));
}

Scalar valueOfZeroDim(const Tensor& value, const Tensor& self) {
  KILN_CHECK(value.dim() == 0,
             "masked_fill_ only supports a 0-dimensional value tensor, but got tensor with ",
             value.dim(), " dimension(s).");
  if (value.isMeta()) {
    KILN_CHECK(self.isMeta(),
               "masked_fill_: the value tensor is on the meta device and has no data");
    return Scalar(int64_t(0));
  }
  return value.item();
}

// index_put_ through one bool mask on meta tensors (capture, AOT tracing): the checks the shapes
// decide; the mask's true count, which values' dim facing it must match unless it is 1, is the
// data's, checked when the op runs on data.
void checkMetaMaskPut(const Tensor& self, const MaskIndex& m, const Tensor& values, bool accumulate) {
  const Tensor& mask = m.mask;
  for (int64_t j = 0; j < mask.dim(); ++j) {
    int64_t at = m.first + j;
    KILN_CHECK_INDEX(at < self.dim() && mask.size(j) == self.size(at), "The shape of the mask ",
                     mask.shapeString(), " at index ", j, " does not match the shape of the indexed tensor ",
                     self.shapeString(), " at index ", at);
  }
  DimVector indexed; // -1 for the mask's count
  for (int64_t d = 0; d < m.first; ++d) indexed.push_back(self.size(d));
  indexed.push_back(-1);
  for (int64_t d = m.first + mask.dim(); d < self.dim(); ++d) indexed.push_back(self.size(d));
  bool fits = values.dim() <= int64_t(indexed.size());
  for (int64_t i = 0; fits && i < values.dim(); ++i) {
    int64_t want = indexed[indexed.size() - size_t(values.dim() - i)], have = values.size(i);
    fits = want == -1 || have == 1 || have == want;
  }
  KILN_CHECK(fits, "shape mismatch: value tensor of shape ", values.shapeString(),
             " cannot be broadcast to the indexing result of ", self.shapeString(), " through a mask of shape ",
             mask.shapeString());
  // One value without accumulation is a masked fill, which casts (as the data path does).
  KILN_CHECK(values.dtype() == self.dtype() || (values.numel() == 1 && !accumulate),
             "Index put requires the source and destination dtypes match, got ",
             scalarTypeShortName(self.dtype()), " for the destination and ",
             scalarTypeShortName(values.dtype()), " for the source.");
}

} // namespace

Tensor maskedFill_(const Tensor& self, const Tensor& mask, const Scalar& value) {
  checkMask(mask);
  TensorIteratorConfig c;
  c.opName = "masked_fill_";
  c.outputs = {self};
  c.inputs = {mask};
  c.keepInputDtype = {true};
  c.castInputs = false;
  c.checkOutputCast = false;
  c.computeDtype = self.dtype();
  c.outputDtype = self.dtype();
  TensorIterator iter(std::move(c));
  KILN_DISPATCH_ALL(self.dtype(), "masked_fill_", [&]<typename T>() {
    T v = checkedConvert<T>(value);
    iter.forEach([v](char** data, const int64_t* st, int64_t n) {
      for (int64_t i = 0; i < n; ++i)
        if (*reinterpret_cast<const bool*>(data[1] + i * st[1]))
          *reinterpret_cast<T*>(data[0] + i * st[0]) = v;
    });
  });
  self.bumpVersion();
  return self;
}

Tensor maskedFillTensor_(const Tensor& self, const Tensor& mask, const Tensor& value) {
  return maskedFill_(self, mask, valueOfZeroDim(value, self));
}

Tensor maskedFill(const Tensor& self, const Tensor& mask, const Scalar& value) {
  checkMask(mask);
  Tensor out = Tensor::empty(broadcastShapes("masked_fill", self.sizes(), mask.sizes()),
                             self.dtype(), self.device());
  ops::copy_(out, self, false);
  return maskedFill_(out, mask, value);
}

Tensor maskedFillTensor(const Tensor& self, const Tensor& mask, const Tensor& value) {
  return maskedFill(self, mask, valueOfZeroDim(value, self));
}

Tensor index(const Tensor& self, const std::vector<std::optional<Tensor>>& indices) {
  std::optional<AdvancedIndex> info = makeAdvancedIndex(self, indices);
  if (!info) return ops::clone(self);
  Tensor out = Tensor::empty(info->src.sizes(), self.dtype(), self.device());
  indexedCopy("index", out, info->src, info->indices, IndexedSide::Source, false);
  return out;
}

Tensor indexPut_(const Tensor& self, const std::vector<std::optional<Tensor>>& indices,
                 const Tensor& values, bool accumulate) {
  KILN_CHECK_INDEX(indices.size() <= size_t(self.dim()),
                   "too many indices for tensor of dimension ", self.dim(), " (got ",
                   indices.size(), ")");
  // A single mask with one value is a masked fill (PyTorch takes this path before any dtype check).
  if (!accumulate && values.numel() == 1 && !values.isMeta()) {
    std::optional<Tensor> mask;
    int64_t covered = 0;
    bool onlyMask = true;
    for (const auto& ix : indices) {
      if (!ix || !ix->defined()) {
        ++covered;
        continue;
      }
      bool isMask = ix->dtype() == ScalarType::Bool || ix->dtype() == ScalarType::UInt8;
      if (!isMask || mask) {
        onlyMask = false;
        break;
      }
      for (int64_t j = 0; j < ix->dim(); ++j) {
        int64_t at = covered + j;
        KILN_CHECK_INDEX(at < self.dim() && ix->sizes()[size_t(j)] == self.sizes()[size_t(at)],
                         "The shape of the mask ", ix->shapeString(), " at index ", j,
                         " does not match the shape of the indexed tensor ", self.shapeString(),
                         " at index ", at);
      }
      covered += ix->dim();
      mask = *ix; // a uint8 mask reaches masked_fill_ and is rejected there, as in PyTorch
    }
    if (onlyMask && mask) {
      Tensor m = *mask;
      for (int64_t d = covered; d < self.dim(); ++d)
        m = ops::unsqueeze(m, -1);
      return maskedFill_(self, m, values.item());
    }
  }
  if (self.isMeta()) {
    if (std::optional<MaskIndex> m = singleMaskIndex(indices)) {
      checkMetaMaskPut(self, *m, values, accumulate);
      self.bumpVersion();
      return self;
    }
  }
  std::optional<AdvancedIndex> info = makeAdvancedIndex(self, indices);
  const Tensor& dst = info ? info->src : self;
  KILN_CHECK(isExpandableTo(values.sizes(), dst.sizes()), "shape mismatch: value tensor of shape ",
             values.shapeString(), " cannot be broadcast to indexing result of shape ",
             dst.shapeString());
  KILN_CHECK(values.dtype() == self.dtype(),
             "Index put requires the source and destination dtypes match, got ",
             scalarTypeShortName(self.dtype()), " for the destination and ",
             scalarTypeShortName(values.dtype()), " for the source.");
  Tensor expanded = ops::expand(values, dst.sizes(), false);
  if (!info) {
    ops::copy_(self, expanded, false);
    return self;
  }
  indexedCopy("index_put_", dst, expanded, info->indices, IndexedSide::Destination, accumulate);
  self.bumpVersion();
  return self;
}

Tensor indexPut(const Tensor& self, const std::vector<std::optional<Tensor>>& indices,
                const Tensor& values, bool accumulate) {
  return indexPut_(ops::clone(self), indices, values, accumulate);
}

Tensor indexSelect(const Tensor& self, int64_t dim, const Tensor& index) {
  dim = wrapDim(dim, self.dim());
  int64_t count = index.numel();
  KILN_CHECK_INDEX(index.dim() <= 1, "index_select(): Index is supposed to be a vector");
  KILN_CHECK(!(self.dim() == 0 && count != 1),
             "index_select(): Index to scalar can have only 1 value, got ", count, " value(s)");
  KILN_CHECK(index.dtype() == ScalarType::Int64 || index.dtype() == ScalarType::Int32,
             "index_select(): Expected dtype int32 or int64 for index");
  DimVector shape(self.sizes());
  if (self.dim() > 0) shape[size_t(dim)] = count;
  Tensor out = Tensor::empty(shape, self.dtype(), self.device());
  // Meta tensors (tracing: a roll decomposes into index_select) have no data to copy.
  if (count == 0 || out.isMeta()) return out;
  int64_t size = self.dim() > 0 ? self.sizes()[size_t(dim)] : 1;
  KILN_CHECK(size > 0 || self.dim() <= 1 || self.numel() > 0,
             "index_select(): self indexing axis dim should be positive");
  Tensor values = toInt64(index);
  if (!values.isMeta()) {
    // PyTorch's CPU paths word (and type) the error differently: a RuntimeError from its dim-1
    // and empty-input paths, an IndexError otherwise.
    bool runtimeError = self.dim() > 1 && (dim == 1 || self.numel() == 0);
    const int64_t* p = values.data<int64_t>();
    for (int64_t i = 0; i < count; ++i) {
      if (p[i] >= 0 && p[i] < size) continue;
      if (runtimeError)
        throw Error(
            kiln::strCat("INDICES element is out of DATA bounds, id=", p[i], " axis_dim=", size));
      throw IndexError("index out of range in self");
    }
  }
  if (out.numel() == 0) return out;
  // Rows of a contiguous self along dim are contiguous blocks: copy them whole.
  int64_t inner = 1;
  for (int64_t d = dim + 1; d < self.dim(); ++d)
    inner *= self.sizes()[size_t(d)];
  if (self.isContiguous() && self.dim() > 0 && inner >= 8) {
    const int64_t* p = values.data<int64_t>();
    const int64_t blocks = out.numel() / inner;
    const size_t bytes = size_t(inner) * elementSize(self.dtype());
    const char* from = self.rawData();
    char* to = out.rawData();
#pragma omp parallel for if (out.numel() > 32768)
    for (int64_t b = 0; b < blocks; ++b) {
      int64_t o = b / count, i = b % count;
      std::memcpy(to + size_t(b) * bytes, from + size_t(o * size + p[i]) * bytes, bytes);
    }
    return out;
  }
  DimVector srcStrides(self.strides()), indexStrides(shape.size(), 0);
  int64_t stride = 0;
  if (self.dim() > 0) {
    stride = srcStrides[size_t(dim)];
    srcStrides[size_t(dim)] = 0;
    indexStrides[size_t(dim)] = 1;
  }
  Tensor src = self.asStrided(shape, srcStrides, self.storageOffset());
  indexedCopy("index_select", out, src, {{values.asStrided(shape, indexStrides, 0), size, stride}},
              IndexedSide::Source, false);
  return out;
}

Tensor gather(const Tensor& self, int64_t dim, const Tensor& index, bool sparseGrad) {
  dim = wrapDim(dim, self.dim());
  // An empty index gathers nothing and is not checked further (as in PyTorch).
  if (index.numel() == 0) return Tensor::empty(index.sizes(), self.dtype(), self.device());
  KILN_CHECK(index.dtype() == ScalarType::Int64 || index.dtype() == ScalarType::Int32,
             "gather(): Expected dtype int32/int64 for index");
  auto sizeOr1 = [](const Tensor& t, int64_t d) { return t.dim() == 0 ? 1 : t.sizes()[size_t(d)]; };
  KILN_CHECK(std::max<int64_t>(self.dim(), 1) == std::max<int64_t>(index.dim(), 1),
             "Index tensor must have the same number of dimensions as input tensor");
  for (int64_t d = 0; d < std::max<int64_t>(self.dim(), 1); ++d) {
    if (d == dim) continue;
    KILN_CHECK(sizeOr1(index, d) <= sizeOr1(self, d), "Size does not match at dimension ", d,
               " expected index ", index.shapeString(), " to be no larger than self ",
               self.shapeString(), " apart from dimension ", dim);
  }
  Tensor out = Tensor::empty(index.sizes(), self.dtype(), self.device());
  if (out.isMeta()) return out;
  int64_t size = sizeOr1(self, dim);
  Tensor values = toInt64(index);
  const int64_t* p = values.data<int64_t>();
  for (int64_t i = 0; i < values.numel(); ++i)
    KILN_CHECK(p[i] >= 0 && p[i] < size, "index ", p[i], " is out of bounds for dimension ", dim,
               " with size ", size);
  if (index.dim() > 1) {
    // Lines along dim in parallel (a 1-d index is one line: TensorIterator splits it instead).
    DimVector outStrides(out.strides()), selfStrides(self.strides()), idxStrides(values.strides());
    const int64_t n = index.sizes()[size_t(dim)], oStride = outStrides[size_t(dim)],
                  sStride = selfStrides[size_t(dim)], iStride = idxStrides[size_t(dim)];
    const int64_t* ix = values.data<int64_t>();
    dispatchBySize(elementSize(self.dtype()), [&]<typename T>() {
      T* o = out.data<T>();
      const T* s = self.data<T>();
      cpu::forEachLine(index.sizes(), dim, outStrides, selfStrides, idxStrides,
                       [&](int64_t oOff, int64_t sOff, int64_t iOff) {
                         for (int64_t j = 0; j < n; ++j)
                           o[oOff + j * oStride] = s[sOff + ix[iOff + j * iStride] * sStride];
                       });
    });
    return out;
  }
  DimVector srcStrides(size_t(index.dim()), 0);
  for (int64_t d = 0; d < self.dim(); ++d)
    if (d != dim) srcStrides[size_t(d)] = self.strides()[size_t(d)];
  int64_t stride = self.dim() > 0 ? self.strides()[size_t(dim)] : 0;
  Tensor src = self.asStrided(index.sizes(), srcStrides, self.storageOffset());
  indexedCopy("gather", out, src, {{values, size, stride}}, IndexedSide::Source, false);
  return out;
}

} // namespace kiln::kernels
