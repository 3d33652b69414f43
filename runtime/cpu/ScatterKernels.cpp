// Scatters along a dim: scatter (assign, or reduce= add/multiply), scatter_add, scatter_reduce,
// index_add, index_copy, index_fill, and put (a scatter into the flattened tensor). One loop
// does the work: the positions of the index are split into lines along dim; two lines never
// write the same element of self, so lines run in parallel, and each line runs in index order
// (the last write wins, sums add in order), which makes results independent of the thread count.
#include <cstdint>
#include <omp.h>

#include <cmath>
#include <limits>

#include "generated/KernelDecls.h"
#include "generated/Ops.h"
#include "runtime/ViewGeometry.h"
#include "runtime/cpu/IndexLoops.h"

namespace kiln::kernels {

namespace {

enum class Reduce { Assign, Sum, Prod, Max, Min };

// The reduction as a compile-time choice, so that the inner loop holds no switch.
template <Reduce R, typename T> T applyReduce(T d, T v) {
  using M = opmath_t<T>;
  if constexpr (R == Reduce::Assign) {
    return v;
  } else if constexpr (std::is_same_v<T, bool>) {
    return R == Reduce::Sum || R == Reduce::Max ? (d || v) : (d && v);
  } else if constexpr (R == Reduce::Sum) {
    return T(M(d) + M(v));
  } else if constexpr (R == Reduce::Prod) {
    return T(M(d) * M(v));
  } else {
    if constexpr (!std::is_integral_v<T>)
      if (std::isnan(M(v))) return v; // NaN propagates, as in PyTorch
    return (R == Reduce::Max ? M(v) > M(d) : M(v) < M(d)) ? v : d;
  }
}

template <typename F> void dispatchReduce(Reduce r, const F& f) {
  switch (r) {
  case Reduce::Assign: return f.template operator()<Reduce::Assign>();
  case Reduce::Sum: return f.template operator()<Reduce::Sum>();
  case Reduce::Prod: return f.template operator()<Reduce::Prod>();
  case Reduce::Max: return f.template operator()<Reduce::Max>();
  case Reduce::Min: return f.template operator()<Reduce::Min>();
  }
}

// self[coords(p) with coordinate dim replaced by index[p]] (op)= src[p] for every position p of
// `shape`. index is int64 and already checked (negative values wrap); src has self's dtype.
void scatterLoop(const Tensor& self, int64_t dim, IntArrayRef shape, const Tensor& index,
                 const DimVector& indexStrides, const Tensor& src, const DimVector& srcStrides,
                 Reduce r) {
  if (self.isMeta() || computeNumel(shape) == 0) return;
  DimVector dstStrides(self.strides());
  if (dstStrides.empty()) dstStrides.push_back(1); // a 0-d self is seen as [1]
  const int64_t n = shape[size_t(dim)], size = self.dim() == 0 ? 1 : self.sizes()[size_t(dim)];
  const int64_t dStride = dstStrides[size_t(dim)], sStride = srcStrides[size_t(dim)],
                iStride = indexStrides[size_t(dim)];
  const int64_t* idx = index.data<int64_t>();
  KILN_DISPATCH_ALL(self.dtype(), "scatter", [&]<typename T>() {
    T* dst = self.data<T>();
    const T* from = src.data<T>();
    dispatchReduce(r, [&]<Reduce R>() {
      cpu::forEachLine(shape, dim, dstStrides, srcStrides, indexStrides,
                  [&](int64_t dOff, int64_t sOff, int64_t iOff) {
                    for (int64_t j = 0; j < n; ++j) {
                      int64_t k = idx[iOff + j * iStride];
                      if (k < 0) k += size;
                      T& d = dst[dOff + k * dStride];
                      d = applyReduce<R>(d, from[sOff + j * sStride]);
                    }
                  });
    });
  });
  self.bumpVersion();
}

DimVector stridesOrUnit(const Tensor& t) {
  DimVector s(t.strides());
  if (s.empty()) s.push_back(0);
  return s;
}

Tensor asInt64(const Tensor& index) {
  return index.dtype() == ScalarType::Int64 ? index : ops::_to_copy(index, ScalarType::Int64);
}

// Every value of index in [-size, size) (negatives only when allowed), else `error` is thrown.
template <typename E>
void checkIndexValues(const Tensor& index, int64_t size, bool allowNegative, const char* prefix,
                      int64_t dim) {
  if (index.isMeta() || index.numel() == 0) return;
  Tensor c = index.isContiguous() ? index : ops::contiguous(index);
  const int64_t* p = c.data<int64_t>();
  int64_t lo = allowNegative ? -size : 0;
  for (int64_t i = 0; i < c.numel(); ++i)
    if (p[i] < lo || p[i] >= size) [[unlikely]]
      throw E(strCat(prefix, "index ", p[i], " is out of bounds for dimension ", dim,
                     " with size ", size));
}

Reduce reduceOfScatterArg(const std::string& reduce) {
  if (reduce == "add") return Reduce::Sum;
  if (reduce == "multiply") return Reduce::Prod;
  throw Error("reduce argument must be either add or multiply.");
}

// A tensor of self's dtype holding `value`, viewed with zero strides over any shape.
Tensor scalarSource(const Tensor& self, const Scalar& value) {
  if (self.isMeta()) return Tensor::empty({}, self.dtype(), self.device());
  Tensor t = Tensor::empty({}, self.dtype(), self.device());
  KILN_DISPATCH_ALL(self.dtype(), "scatter", [&]<typename T>() { *t.data<T>() = value.to<T>(); });
  return t;
}

// PyTorch's scatter_gather_dtype_check + scatter_shape_check. src may be undefined (value forms).
void checkScatter(const char* op, const Tensor& self, int64_t dim, const Tensor& index,
                  const Tensor* src) {
  KILN_CHECK(index.dtype() == ScalarType::Int64 || index.dtype() == ScalarType::Int32, op,
             "(): Expected dtype int32/int64 for index");
  if (src)
    KILN_CHECK(src->dtype() == self.dtype(), op,
               "(): Expected self.dtype to be equal to src.dtype");
  if (index.numel() == 0) return;
  auto nonempty = [](int64_t d) { return std::max<int64_t>(d, 1); };
  KILN_CHECK(nonempty(self.dim()) == nonempty(index.dim()),
             "Index tensor must have the same number of dimensions as self tensor");
  if (src)
    KILN_CHECK(nonempty(src->dim()) == nonempty(index.dim()),
               "Index tensor must have the same number of dimensions as src tensor");
  auto sizeAt = [](const Tensor& t, int64_t d) { return t.dim() == 0 ? 1 : t.sizes()[size_t(d)]; };
  bool fits = true;
  for (int64_t d = 0; d < nonempty(index.dim()); ++d) {
    if (d != dim && sizeAt(index, d) > sizeAt(self, d)) fits = false;
    if (src && sizeAt(index, d) > sizeAt(*src, d)) fits = false;
  }
  if (!fits) {
    std::string msg = strCat("Expected index ", index.shapeString(), " to be no larger than self ",
                             self.shapeString(), " apart from dimension ", dim);
    if (src) msg += strCat(" and to be no larger size than src ", src->shapeString());
    throw Error(msg);
  }
}

// The scatter family on self in place: src (or the value, when src is null) along dim.
Tensor scatterInto(const char* op, const Tensor& self, int64_t dim, const Tensor& index,
                   const Tensor* src, const Scalar* value, Reduce r) {
  dim = wrapDim(dim, self.dim());
  checkScatter(op, self, dim, index, src);
  if (index.numel() == 0) return self;
  Tensor idx = asInt64(index);
  checkIndexValues<Error>(idx, self.dim() == 0 ? 1 : self.sizes()[size_t(dim)], false, "", dim);
  DimVector shape(index.sizes());
  if (shape.empty()) shape.push_back(1);
  Tensor from = src ? *src : scalarSource(self, *value);
  DimVector srcStrides = src ? stridesOrUnit(*src) : DimVector(shape.size(), 0);
  scatterLoop(self, dim, shape, idx, stridesOrUnit(idx), from, srcStrides, r);
  return self;
}

Tensor cloneForScatter(const Tensor& self) { return ops::clone(self); }

} // namespace

// --- scatter / scatter_add ---

// A Python number given for src reaches the src overloads as a wrapped number: it is the value
// form's value (PyTorch's parser picks scatter.value for numbers).
Tensor scatterSrc_(const Tensor& self, int64_t dim, const Tensor& index, const Tensor& src) {
  if (src.isWrappedNumber()) {
    Scalar value = src.isMeta() ? Scalar(int64_t(0)) : src.item();
    return scatterInto("scatter", self, dim, index, nullptr, &value, Reduce::Assign);
  }
  return scatterInto("scatter", self, dim, index, &src, nullptr, Reduce::Assign);
}

Tensor scatterValue_(const Tensor& self, int64_t dim, const Tensor& index, const Scalar& value) {
  return scatterInto("scatter", self, dim, index, nullptr, &value, Reduce::Assign);
}

Tensor scatterSrcReduce_(const Tensor& self, int64_t dim, const Tensor& index, const Tensor& src,
                         const std::string& reduce) {
  if (src.isWrappedNumber()) {
    Scalar value = src.isMeta() ? Scalar(int64_t(0)) : src.item();
    return scatterInto("scatter", self, dim, index, nullptr, &value, reduceOfScatterArg(reduce));
  }
  return scatterInto("scatter", self, dim, index, &src, nullptr, reduceOfScatterArg(reduce));
}

Tensor scatterValueReduce_(const Tensor& self, int64_t dim, const Tensor& index,
                           const Scalar& value, const std::string& reduce) {
  return scatterInto("scatter", self, dim, index, nullptr, &value, reduceOfScatterArg(reduce));
}

Tensor scatterSrc(const Tensor& self, int64_t dim, const Tensor& index, const Tensor& src) {
  return scatterSrc_(cloneForScatter(self), dim, index, src);
}

Tensor scatterValue(const Tensor& self, int64_t dim, const Tensor& index, const Scalar& value) {
  return scatterValue_(cloneForScatter(self), dim, index, value);
}

Tensor scatterSrcReduce(const Tensor& self, int64_t dim, const Tensor& index, const Tensor& src,
                        const std::string& reduce) {
  return scatterSrcReduce_(cloneForScatter(self), dim, index, src, reduce);
}

Tensor scatterValueReduce(const Tensor& self, int64_t dim, const Tensor& index,
                          const Scalar& value, const std::string& reduce) {
  return scatterValueReduce_(cloneForScatter(self), dim, index, value, reduce);
}

Tensor scatterAdd_(const Tensor& self, int64_t dim, const Tensor& index, const Tensor& src) {
  return scatterInto("scatter", self, dim, index, &src, nullptr, Reduce::Sum);
}

Tensor scatterAdd(const Tensor& self, int64_t dim, const Tensor& index, const Tensor& src) {
  return scatterAdd_(cloneForScatter(self), dim, index, src);
}

// --- scatter_reduce ---

Tensor scatterReduceTwo_(const Tensor& self, int64_t dim, const Tensor& index, const Tensor& src,
                         const std::string& reduce, bool includeSelf) {
  Reduce r;
  bool mean = reduce == "mean";
  if (reduce == "sum" || mean) r = Reduce::Sum;
  else if (reduce == "prod") r = Reduce::Prod;
  else if (reduce == "amax") r = Reduce::Max;
  else if (reduce == "amin") r = Reduce::Min;
  else
    throw Error(
        strCat("reduce argument must be either sum, prod, mean, amax or amin, got ", reduce));
  dim = wrapDim(dim, self.dim());
  checkScatter("scatter_reduce", self, dim, index, &src);
  if (mean && self.dtype() == ScalarType::Bool)
    throw NotImplementedError(
        "\"scatter_gather_tensor_cpu_reduce_mean\" not implemented for 'Bool'");
  if (index.numel() == 0 || self.isMeta()) return self;
  if (!includeSelf) {
    // Scattered-to elements start from the reduction's identity, so only src values count.
    Scalar identity(int64_t(0));
    KILN_DISPATCH_ALL(self.dtype(), "scatter_reduce", [&]<typename T>() {
      if (r == Reduce::Prod) identity = Scalar(int64_t(1));
      if (r == Reduce::Max || r == Reduce::Min) {
        bool max = r == Reduce::Max;
        if constexpr (std::is_same_v<T, bool>)
          identity = Scalar(!max);
        else if constexpr (std::is_integral_v<T>)
          identity = Scalar(int64_t(max ? std::numeric_limits<T>::lowest()
                                        : std::numeric_limits<T>::max()));
        else
          identity = Scalar(max ? -std::numeric_limits<double>::infinity()
                                : std::numeric_limits<double>::infinity());
      }
    });
    scatterInto("scatter_reduce", self, dim, index, nullptr, &identity, Reduce::Assign);
  }
  scatterInto("scatter_reduce", self, dim, index, &src, nullptr, r);
  if (mean) {
    Tensor count = includeSelf ? ops::ones_like(self) : ops::zeros_like(self);
    ops::scatter_add_(count, dim, index, ops::ones_like(src));
    ops::masked_fill_(count, ops::eq(count, Scalar(int64_t(0))), Scalar(int64_t(1)));
    if (isFloatingType(self.dtype())) ops::div_(self, count);
    else ops::div_(self, count, std::string("floor"));
  }
  return self;
}

Tensor scatterReduceTwo(const Tensor& self, int64_t dim, const Tensor& index, const Tensor& src,
                        const std::string& reduce, bool includeSelf) {
  return scatterReduceTwo_(cloneForScatter(self), dim, index, src, reduce, includeSelf);
}

// --- index_add / index_copy / index_fill ---

namespace {

// The index of an index_* op as an int64 operand over `shape` (source's shape): index[p[dim]].
DimVector broadcastIndexStrides(const Tensor& index, size_t rank, int64_t dim) {
  DimVector s(rank, 0);
  s[size_t(dim)] = index.dim() == 0 ? 0 : index.strides()[0];
  return s;
}

int64_t sizeAlong(const Tensor& t, int64_t dim) {
  return t.dim() == 0 ? 1 : t.sizes()[size_t(dim)];
}

// source's shape with at least one dim (a 0-d tensor is [1]).
DimVector shapeOf(const Tensor& t) {
  DimVector s(t.sizes());
  if (s.empty()) s.push_back(1);
  return s;
}

} // namespace

Tensor indexAdd_(const Tensor& self, int64_t dim, const Tensor& index, const Tensor& source,
                 const Scalar& alpha) {
  dim = wrapDim(dim, self.dim());
  int64_t count = index.numel();
  KILN_CHECK_INDEX(index.dim() <= 1, "index_add_(): Index is supposed to be a vector");
  KILN_CHECK(index.dtype() == ScalarType::Int64 || index.dtype() == ScalarType::Int32,
             "index_add_(): Expected dtype int32/int64 for index but got: ",
             scalarTypeShortName(index.dtype()));
  KILN_CHECK(self.dtype() == source.dtype(), "index_add_(): self (",
             scalarTypeShortName(self.dtype()), ") and source (",
             scalarTypeShortName(source.dtype()), ") must have the same scalar type");
  KILN_CHECK(dim == 0 || dim < source.dim(), "index_add_(): Indexing dim ", dim,
             " is out of bounds of the source tensor with dim ", source.dim());
  KILN_CHECK(count == sizeAlong(source, dim), "index_add_(): Number of indices (", count,
             ") should be equal to source.size(dim): (", sizeAlong(source, dim), "), for dim: ",
             dim);
  KILN_CHECK(std::max<int64_t>(self.dim(), 1) == std::max<int64_t>(source.dim(), 1),
             "index_add_(): self and source must have the same number of dimensions, got ",
             self.dim(), " and ", source.dim());
  for (int64_t d = 0; d < source.dim(); ++d)
    KILN_CHECK(d == dim || source.sizes()[size_t(d)] == self.sizes()[size_t(d)],
               "index_add_(): source ", source.shapeString(), " and self ", self.shapeString(),
               " must match in every dim but ", dim);
  if (count == 0 || self.isMeta()) return self;
  Tensor idx = asInt64(index);
  checkIndexValues<Error>(idx, sizeAlong(self, dim), false, "", dim);
  bool unitAlpha = alpha.isIntegral() ? alpha.toInt() == 1 : alpha.toDouble() == 1.0;
  // alpha scales in self's dtype (a bool or integer source times alpha is promoted by mul).
  Tensor src = unitAlpha ? source : ops::_to_copy(ops::mul(source, alpha), self.dtype());
  DimVector shape = shapeOf(source);
  scatterLoop(self, dim, shape, idx, broadcastIndexStrides(idx, shape.size(), dim), src,
              stridesOrUnit(src), Reduce::Sum);
  return self;
}

Tensor indexAdd(const Tensor& self, int64_t dim, const Tensor& index, const Tensor& source,
                const Scalar& alpha) {
  return indexAdd_(ops::clone(self), dim, index, source, alpha);
}

Tensor indexCopy_(const Tensor& self, int64_t dim, const Tensor& index, const Tensor& source) {
  dim = wrapDim(dim, self.dim());
  int64_t count = index.numel();
  KILN_CHECK_INDEX(index.dim() <= 1, "index_copy_(): Index should have dimension 1 or 0 (got ",
                   index.dim(), ")");
  KILN_CHECK(index.dtype() == ScalarType::Int64,
             "index_copy_(): Expected a long tensor for index, but got ",
             scalarTypeShortName(index.dtype()));
  KILN_CHECK(self.dtype() == source.dtype(),
             "index_copy_(): self and source expected to have the same dtype, but got (self) ",
             scalarTypeShortName(self.dtype()), " and (source) ",
             scalarTypeShortName(source.dtype()));
  KILN_CHECK(std::max<int64_t>(self.dim(), 1) == std::max<int64_t>(source.dim(), 1),
             "index_copy_(): When source and destination are not scalars, their dimensionality "
             "must match. Source dimensionality (",
             source.dim(), "), destination dimensionality (", self.dim(), ")");
  KILN_CHECK(count == sizeAlong(source, dim), "index_copy_(): Number of indices (", count,
             ") should be equal to source.size(dim) (", sizeAlong(source, dim), ")");
  for (int64_t d = 0; d < source.dim(); ++d)
    KILN_CHECK(d == dim || source.sizes()[size_t(d)] == self.sizes()[size_t(d)],
               "index_copy_(): Source/destination tensor must have same slice shapes. "
               "Destination slice shape: ",
               self.shapeString(), " at dimension ", dim, " and source slice shape: ",
               source.shapeString(), " at dimension ", dim, ".");
  if (count == 0 || self.isMeta()) return self;
  checkIndexValues<IndexError>(index, sizeAlong(self, dim), false, "index_copy_(): ", dim);
  DimVector shape = shapeOf(source);
  scatterLoop(self, dim, shape, index, broadcastIndexStrides(index, shape.size(), dim), source,
              stridesOrUnit(source), Reduce::Assign);
  return self;
}

Tensor indexCopy(const Tensor& self, int64_t dim, const Tensor& index, const Tensor& source) {
  return indexCopy_(ops::clone(self), dim, index, source);
}

Tensor indexFill_(const Tensor& self, int64_t dim, const Tensor& index, const Scalar& value) {
  dim = wrapDim(dim, self.dim());
  KILN_CHECK_INDEX(index.dtype() == ScalarType::Int64,
                   "index_fill_(): Expected dtype int64 for index.");
  KILN_CHECK_INDEX(index.dim() <= 1, "Index has to be a vector/scalar");
  if (index.numel() == 0 || self.numel() == 0 || self.isMeta()) return self;
  checkIndexValues<IndexError>(index, sizeAlong(self, dim), true, "", dim);
  DimVector shape = shapeOf(self);
  shape[size_t(dim)] = index.numel();
  Tensor from = scalarSource(self, value);
  scatterLoop(self, dim, shape, index, broadcastIndexStrides(index, shape.size(), dim), from,
              DimVector(shape.size(), 0), Reduce::Assign);
  return self;
}

Tensor indexFillTensor_(const Tensor& self, int64_t dim, const Tensor& index,
                        const Tensor& value) {
  KILN_CHECK(value.dim() == 0,
             "index_fill_ only supports a 0-dimensional value tensor, but got tensor with ",
             value.dim(), " dimension(s).");
  return indexFill_(self, dim, index, value.isMeta() ? Scalar(int64_t(0)) : value.item());
}

Tensor indexFill(const Tensor& self, int64_t dim, const Tensor& index, const Scalar& value) {
  return indexFill_(ops::clone(self), dim, index, value);
}

Tensor indexFillTensor(const Tensor& self, int64_t dim, const Tensor& index, const Tensor& value) {
  return indexFillTensor_(ops::clone(self), dim, index, value);
}

// --- put: self.view(-1)[index] (+)= source ---

Tensor put_(const Tensor& self, const Tensor& index, const Tensor& source, bool accumulate) {
  KILN_CHECK(index.dtype() == ScalarType::Int64,
             "put_(): Expected a long tensor for index, but got ",
             scalarTypeShortName(index.dtype()));
  KILN_CHECK(self.dtype() == source.dtype(),
             "put_(): self and source expected to have the same dtype, but got self.dtype = ",
             scalarTypeShortName(self.dtype()), " and source.dtype = ",
             scalarTypeShortName(source.dtype()));
  KILN_CHECK_INDEX(source.numel() == index.numel(),
                   "put_(): Expected source and index to have the same number of elements, but "
                   "got source.numel() = ",
                   source.numel(), ", index.numel() = ", index.numel());
  KILN_CHECK(!(self.numel() == 0 && index.numel() > 0),
             "put_(): Tried to put elements into an empty tensor");
  if (index.numel() == 0 || self.isMeta()) return self;
  int64_t n = self.numel();
  Tensor flatIndex = ops::reshape(ops::contiguous(index), {index.numel()});
  const int64_t* p = flatIndex.data<int64_t>();
  for (int64_t i = 0; i < flatIndex.numel(); ++i)
    KILN_CHECK_INDEX(p[i] >= -n && p[i] < n, "out of range: tried to access index ", p[i],
                     " on a tensor of ", n, " elements.");
  Tensor target = self.isContiguous() ? self : ops::contiguous(self);
  Tensor flat = target.asStrided({n}, {1}, target.storageOffset());
  Tensor src = ops::reshape(ops::contiguous(source), {source.numel()});
  // One line holding every element: puts run in index order.
  DimVector unit(1, 1);
  scatterLoop(flat, 0, {flatIndex.numel()}, flatIndex, unit, src, unit,
              accumulate ? Reduce::Sum : Reduce::Assign);
  if (!target.isSame(self)) ops::copy_(self, target, false);
  self.bumpVersion();
  return self;
}

Tensor put(const Tensor& self, const Tensor& index, const Tensor& source, bool accumulate) {
  return put_(ops::clone(self), index, source, accumulate);
}

} // namespace kiln::kernels
