// Kernels whose result size depends on the data or that index the flattened tensor:
// masked_select, masked_scatter, take, nonzero, bincount, searchsorted and the index list of
// repeat_interleave. Data-dependent shapes cannot be computed on the meta device.
#include <cstdint>
#include <omp.h>

#include "generated/KernelDecls.h"
#include "generated/Ops.h"
#include "runtime/TensorIterator.h"
#include "runtime/ViewGeometry.h"

namespace kiln::kernels {

namespace {

void checkNotMeta(const Tensor& t, const char* op) {
  KILN_CHECK(!t.isMeta(), op,
             "(): the result's shape is data-dependent; it cannot run on the meta device");
}

// Calls f with an unsigned integer type of `size` bytes: moving elements needs only their bytes.
template <typename F> void dispatchBySize(size_t size, const F& f) {
  switch (size) {
  case 1: return f.template operator()<uint8_t>();
  case 2: return f.template operator()<uint16_t>();
  case 4: return f.template operator()<uint32_t>();
  default: return f.template operator()<uint64_t>();
  }
}

// t broadcast to shape and made contiguous (t itself when it already is).
Tensor denseAs(const Tensor& t, IntArrayRef shape) {
  Tensor e = ops::expand(t, shape, false);
  return e.isContiguous() ? e : ops::contiguous(e);
}

} // namespace

// --- masks ---

Tensor maskedSelect(const Tensor& self, const Tensor& mask) {
  KILN_CHECK(mask.dtype() == ScalarType::Bool, "masked_select: expected BoolTensor for mask");
  DimVector shape = broadcastShapes("masked_select", self.sizes(), mask.sizes());
  checkNotMeta(self, "masked_select");
  checkNotMeta(mask, "masked_select");
  Tensor values = denseAs(self, shape), m = denseAs(mask, shape);
  const bool* keep = m.data<bool>();
  int64_t n = m.numel(), count = 0;
  for (int64_t i = 0; i < n; ++i)
    count += keep[i];
  Tensor out = Tensor::empty({count}, self.dtype(), self.device());
  dispatchBySize(elementSize(self.dtype()), [&]<typename T>() {
    const T* in = values.data<T>();
    T* o = out.data<T>();
    for (int64_t i = 0, w = 0; i < n; ++i)
      if (keep[i]) o[w++] = in[i];
  });
  return out;
}

Tensor maskedScatter_(const Tensor& self, const Tensor& mask, const Tensor& source) {
  KILN_CHECK(mask.dtype() == ScalarType::Bool,
             "masked_scatter_ only supports boolean masks, but got mask with dtype ",
             scalarTypeShortName(mask.dtype()));
  KILN_CHECK(self.dtype() == source.dtype(),
             "masked_scatter: expected self and source to have same dtypes but got",
             scalarTypeShortName(self.dtype()), " and ", scalarTypeShortName(source.dtype()));
  KILN_CHECK(isExpandableTo(mask.sizes(), self.sizes()), "masked_scatter_: mask of shape ",
             mask.shapeString(), " cannot be broadcast to self of shape ", self.shapeString());
  if (self.isMeta() || self.numel() == 0) return self;
  Tensor m = denseAs(mask, self.sizes());
  const bool* keep = m.data<bool>();
  int64_t n = m.numel(), count = 0;
  for (int64_t i = 0; i < n; ++i)
    count += keep[i];
  KILN_CHECK(count <= source.numel(), "Number of elements of source < number of ones in mask");
  Tensor src = source.isContiguous() ? source : ops::contiguous(source);
  Tensor target = self.isContiguous() ? self : ops::contiguous(self);
  dispatchBySize(elementSize(self.dtype()), [&]<typename T>() {
    const T* in = src.data<T>();
    T* o = target.data<T>();
    for (int64_t i = 0, r = 0; i < n; ++i)
      if (keep[i]) o[i] = in[r++];
  });
  if (!target.isSame(self)) ops::copy_(self, target, false);
  self.bumpVersion();
  return self;
}

Tensor maskedScatter(const Tensor& self, const Tensor& mask, const Tensor& source) {
  DimVector shape = broadcastShapes("masked_scatter", self.sizes(), mask.sizes());
  Tensor out = Tensor::empty(shape, self.dtype(), self.device());
  if (!out.isMeta()) ops::copy_(out, self, false);
  return maskedScatter_(out, mask, source);
}

// --- take: self.view(-1)[index] ---

Tensor take(const Tensor& self, const Tensor& index) {
  KILN_CHECK(index.dtype() == ScalarType::Int64,
             "take(): Expected a long tensor for index, but got ",
             scalarTypeShortName(index.dtype()));
  Tensor out = Tensor::empty(index.sizes(), self.dtype(), self.device());
  if (out.isMeta() || out.numel() == 0) return out;
  KILN_CHECK_INDEX(self.numel() > 0, "take(): tried to take from an empty tensor");
  int64_t n = self.numel(), count = index.numel();
  Tensor values = self.isContiguous() ? self : ops::contiguous(self);
  Tensor idx = index.isContiguous() ? index : ops::contiguous(index);
  const int64_t* p = idx.data<int64_t>();
  for (int64_t i = 0; i < count; ++i)
    KILN_CHECK_INDEX(p[i] >= -n && p[i] < n, "out of range: tried to access index ", p[i],
                     " on a tensor of ", n, " elements.");
  dispatchBySize(elementSize(self.dtype()), [&]<typename T>() {
    const T* in = values.data<T>();
    T* o = out.data<T>();
#pragma omp parallel for if (count > 32768)
    for (int64_t i = 0; i < count; ++i)
      o[i] = in[p[i] < 0 ? p[i] + n : p[i]];
  });
  return out;
}

// --- nonzero: the coordinates of the nonzero elements, one row each ---

Tensor nonzero(const Tensor& self) {
  checkNotMeta(self, "nonzero");
  Tensor flags = ops::ne(self, Scalar(int64_t(0)));
  Tensor m = flags.isContiguous() ? flags : ops::contiguous(flags);
  const bool* p = m.data<bool>();
  int64_t n = m.numel(), count = 0;
  for (int64_t i = 0; i < n; ++i)
    count += p[i];
  size_t rank = size_t(self.dim());
  Tensor out = Tensor::empty({count, int64_t(rank)}, ScalarType::Int64, self.device());
  int64_t* o = out.data<int64_t>();
  DimVector coord(rank, 0);
  IntArrayRef sizes = self.sizes();
  for (int64_t i = 0; i < n; ++i) {
    if (p[i]) {
      for (size_t d = 0; d < rank; ++d)
        *o++ = coord[d];
    }
    for (size_t d = rank; d-- > 0;) {
      if (++coord[d] < sizes[d]) break;
      coord[d] = 0;
    }
  }
  return out;
}

// --- bincount ---

Tensor bincount(const Tensor& self, const std::optional<Tensor>& weights, int64_t minlength) {
  if (!isIntegralType(self.dtype(), false))
    throw NotImplementedError(strCat("\"bincount_cpu\" not implemented for '",
                                     scalarTypeShortName(self.dtype()), "'"));
  KILN_CHECK(minlength >= 0, "minlength should be >= 0");
  bool weighted = weights && weights->defined();
  KILN_CHECK(self.dim() == 1 || (self.dim() == 0 && self.numel() == 0),
             "bincount only supports 1-d non-negative integral inputs.");
  if (weighted)
    KILN_CHECK(weights->dim() == 1 && weights->sizes()[0] == self.numel(),
               "weights should be 1-d and have the same length as input");
  checkNotMeta(self, "bincount");
  ScalarType outType = !weighted                                   ? ScalarType::Int64
                       : weights->dtype() == ScalarType::Float32 ? ScalarType::Float32
                                                                   : ScalarType::Float64;
  Tensor values = ops::_to_copy(self, ScalarType::Int64);
  const int64_t* v = values.data<int64_t>();
  int64_t n = values.numel(), bins = minlength;
  for (int64_t i = 0; i < n; ++i) {
    KILN_CHECK(v[i] >= 0, "bincount only supports 1-d non-negative integral inputs.");
    bins = std::max(bins, v[i] + 1);
  }
  Tensor out = ops::zeros({bins}, outType, self.device());
  if (n == 0) return out;
  if (!weighted) {
    int64_t* o = out.data<int64_t>();
    for (int64_t i = 0; i < n; ++i)
      ++o[v[i]];
    return out;
  }
  Tensor w = ops::_to_copy(*weights, outType);
  auto accumulate = [&]<typename T>() {
    const T* wp = w.data<T>();
    T* o = out.data<T>();
    for (int64_t i = 0; i < n; ++i)
      o[v[i]] += wp[i];
  };
  if (outType == ScalarType::Float32) accumulate.template operator()<float>();
  else accumulate.template operator()<double>();
  return out;
}

// --- searchsorted ---

namespace {

// For each value, the position among its row's boundaries (all one row when valuesPerRow is 0)
// where it would be inserted; `order` (when defined) lists each row's boundaries in sorted order.
template <typename T>
void searchRows(const Tensor& boundaries, const Tensor& values, const Tensor& order,
                const Tensor& out, int64_t len, int64_t valuesPerRow, bool right) {
  using M = opmath_t<T>;
  const T* bp = boundaries.data<T>();
  const T* vp = values.data<T>();
  const int64_t* sp = order.defined() ? order.data<int64_t>() : nullptr;
  const int64_t count = values.numel();
  const bool int32 = out.dtype() == ScalarType::Int32;
#pragma omp parallel for if (count > 32768)
  for (int64_t i = 0; i < count; ++i) {
    int64_t row = valuesPerRow == 0 ? 0 : i / valuesPerRow;
    const T* seq = bp + row * len;
    const int64_t* perm = sp ? sp + row * len : nullptr;
    M val = M(vp[i]);
    // PyTorch's comparisons: a NaN value (or boundary) moves the search right.
    int64_t lo = 0, hi = len;
    while (lo < hi) {
      int64_t mid = lo + (hi - lo) / 2;
      M at = M(seq[perm ? perm[mid] : mid]);
      bool goRight = right ? !(at > val) : !(at >= val);
      if (goRight) lo = mid + 1;
      else hi = mid;
    }
    if (int32) out.data<int32_t>()[i] = int32_t(lo);
    else out.data<int64_t>()[i] = lo;
  }
}

} // namespace

Tensor searchsorted(const Tensor& sortedSequence, const Tensor& self, bool outInt32, bool right,
                    const std::optional<std::string>& side, const std::optional<Tensor>& sorter) {
  if (side) {
    KILN_CHECK(*side == "left" || *side == "right",
               "torch.searchsorted(): side can only be 'left' or 'right' but got ", *side);
    KILN_CHECK(!(*side == "left" && right),
               "torch.searchsorted(): side and right can't be set to opposites, got side of ",
               *side, " while right was True");
    right = *side == "right";
  }
  const Tensor& bd = sortedSequence;
  KILN_CHECK(bd.dim() > 0, "torch.searchsorted(): boundaries tensor should have positive "
             "dimension, but got 0 dimension");
  bool oneBoundary = bd.dim() == 1;
  if (!oneBoundary) {
    bool match = self.dim() == bd.dim();
    for (int64_t d = 0; match && d + 1 < bd.dim(); ++d)
      match = self.sizes()[size_t(d)] == bd.sizes()[size_t(d)];
    KILN_CHECK(match, "torch.searchsorted(): boundaries tensor should be 1 dimension or the first "
               "N-1 dimensions of boundaries tensor and input value tensor must match, but we got "
               "boundaries tensor ", bd.shapeString(), " and input value tensor ",
               self.shapeString());
  }
  bool sorted = sorter && sorter->defined();
  if (sorted) {
    KILN_CHECK(sorter->dtype() == ScalarType::Int64,
               "torch.searchsorted(): sorter must be a tensor of long dtype but got ",
               scalarTypeShortName(sorter->dtype()));
    KILN_CHECK(sorter->sizes() == bd.sizes(), "torch.searchsorted(): boundary and sorter must "
               "have the same size, but got boundary tensor ", bd.shapeString(),
               "and got sorter tensor ", sorter->shapeString());
  }
  ScalarType outType = outInt32 ? ScalarType::Int32 : ScalarType::Int64;
  // Meta boundaries with a real value (searchsorted.Scalar's value tensor, made while a trace
  // runs the composite on fakes) give a meta result: there is no data to search.
  Tensor out = Tensor::empty(self.sizes(), outType, bd.isMeta() ? bd.device() : self.device());
  if (out.isMeta() || self.isMeta() || out.numel() == 0) return out;
  ScalarType common = promoteTypes(bd.dtype(), self.dtype());
  Tensor b = ops::contiguous(ops::_to_copy(bd, common));
  Tensor v = ops::contiguous(ops::_to_copy(self, common));
  Tensor order = sorted ? ops::contiguous(*sorter) : Tensor();
  const int64_t len = bd.sizes()[size_t(bd.dim() - 1)];
  const int64_t valuesPerRow = self.dim() == 0 ? 1 : self.sizes()[size_t(self.dim() - 1)];
  KILN_DISPATCH_NUMERIC(common, "searchsorted_out_cpu", [&]<typename T>() {
    searchRows<T>(b, v, order, out, len, oneBoundary ? 0 : valuesPerRow, right);
  });
  return out;
}

// --- repeat_interleave's indices: i repeated repeats[i] times ---

Tensor repeatInterleaveIndices(const Tensor& repeats, std::optional<int64_t> outputSize) {
  KILN_CHECK(repeats.dim() == 1, "repeat_interleave only accept 1D vector as repeat");
  if (repeats.dtype() != ScalarType::Int64 && repeats.dtype() != ScalarType::Int32)
    throw NotImplementedError(strCat("\"repeat_interleave_cpu\" not implemented for '",
                                     scalarTypeShortName(repeats.dtype()), "'"));
  checkNotMeta(repeats, "repeat_interleave");
  Tensor r = ops::contiguous(ops::_to_copy(ops::reshape(repeats, {repeats.numel()}),
                                          ScalarType::Int64));
  const int64_t* rp = r.data<int64_t>();
  int64_t total = 0;
  for (int64_t i = 0; i < r.numel(); ++i) {
    KILN_CHECK(rp[i] >= 0, "repeats can not be negative");
    total += rp[i];
  }
  if (outputSize)
    KILN_CHECK(*outputSize == total, "allocated size does not match required size");
  Tensor out = Tensor::empty({total}, ScalarType::Int64, repeats.device());
  int64_t* o = out.data<int64_t>();
  for (int64_t i = 0; i < r.numel(); ++i)
    for (int64_t j = 0; j < rp[i]; ++j)
      *o++ = i;
  return out;
}

} // namespace kiln::kernels
