// TensorIterator: promotion, broadcasting, output layout and the parallel strided loop.
#include "runtime/TensorIterator.h"

#include "runtime/DefaultDtype.h"

#include <cstdint>
#include <algorithm>
#include <numeric>
#include <omp.h>

#include "generated/Ops.h"

namespace kiln {

namespace {

std::optional<ScalarType> promoteOpt(std::optional<ScalarType> a, ScalarType b) {
  return a ? promoteTypes(*a, b) : b;
}

// PyTorch's combine_categories: a higher category (complex over float over int over bool) wins
// outright; a complex lower one keeps a floating higher one's precision.
std::optional<ScalarType> combineCategories(std::optional<ScalarType> higher,
                                            std::optional<ScalarType> lower) {
  if (!higher) return lower;
  if (isComplexType(*higher)) return higher;
  if (lower && isComplexType(*lower)) return isFloatingType(*higher) ? toComplexType(*higher) : *lower;
  if (isFloatingType(*higher)) return higher;
  if (*higher == ScalarType::Bool || (lower && isFloatingType(*lower)))
    return lower ? promoteTypes(*higher, *lower) : *higher;
  return higher;
}

} // namespace

ScalarType resultType(const std::vector<Tensor>& tensors) {
  std::optional<ScalarType> dimResult, zeroResult, wrappedResult;
  for (const Tensor& t : tensors) {
    if (!t.defined()) continue;
    ScalarType d = t.dtype();
    if (t.isWrappedNumber()) {
      if (isFloatingType(d)) d = defaultFloatType();
      if (isComplexType(d)) d = defaultComplexType();
      wrappedResult = promoteOpt(wrappedResult, d);
    } else if (t.dim() == 0) {
      zeroResult = promoteOpt(zeroResult, d);
    } else {
      dimResult = promoteOpt(dimResult, d);
    }
  }
  auto r = combineCategories(dimResult, combineCategories(zeroResult, wrappedResult));
  return r.value_or(defaultFloatType());
}

DimVector broadcastShapes(const char* op, IntArrayRef a, IntArrayRef b) {
  size_t n = std::max(a.size(), b.size());
  DimVector out(n);
  for (size_t i = 0; i < n; ++i) {
    int64_t da = i < n - a.size() ? 1 : a[i - (n - a.size())];
    int64_t db = i < n - b.size() ? 1 : b[i - (n - b.size())];
    if (da != db && da != 1 && db != 1) {
      throw Error(strCat(op, ": The size of tensor a (", da, ") must match the size of tensor b (",
                         db, ") at non-singleton dimension ", i, " (shapes ", shapeString(a),
                         " and ", shapeString(b), ")"));
    }
    out[i] = da == 1 ? db : da;
  }
  return out;
}

TensorIterator::TensorIterator(TensorIteratorConfig c) : opName_(c.opName) {
  noutputs_ = int(c.outputs.size());
  for (auto& t : c.outputs) operands_.push_back(t);
  for (auto& t : c.inputs) {
    KILN_CHECK(t.defined(), opName_, ": an input tensor is undefined");
    operands_.push_back(t);
  }
  for (const Tensor& t : operands_)
    if (t.defined() && t.isMeta()) isMeta_ = true;
  computeTypes(c);
  computeShape();
  allocateOutputs(c);
  if (numel_ > 0 && !isMeta_) buildIteration();
}

TensorIterator TensorIterator::unary(const char* op, const Tensor& a, PromotionKind kind,
                                     Tensor out) {
  TensorIteratorConfig c;
  c.opName = op;
  c.outputs = {out};
  c.inputs = {a};
  c.promotion = kind;
  return TensorIterator(std::move(c));
}

TensorIterator TensorIterator::binary(const char* op, const Tensor& a, const Tensor& b,
                                      PromotionKind kind, Tensor out) {
  TensorIteratorConfig c;
  c.opName = op;
  c.outputs = {out};
  c.inputs = {a, b};
  c.promotion = kind;
  return TensorIterator(std::move(c));
}

void TensorIterator::computeTypes(const TensorIteratorConfig& c) {
  std::vector<Tensor> promoted;
  for (size_t i = 0; i < c.inputs.size(); ++i) {
    bool keep = i < c.keepInputDtype.size() && c.keepInputDtype[i];
    if (!keep) promoted.push_back(c.inputs[i]);
  }
  ScalarType common = promoted.empty() ? c.inputs.at(0).dtype() : resultType(promoted);
  if (c.promotion == PromotionKind::None && !promoted.empty()) {
    for (const Tensor& t : promoted) {
      KILN_CHECK(t.dtype() == promoted[0].dtype(), opName_,
                 ": expected all inputs to have the same dtype, but got ",
                 scalarTypeName(promoted[0].dtype()), " and ", scalarTypeName(t.dtype()));
    }
  }
  ScalarType outType = common;
  if (c.promotion == PromotionKind::IntToFloat && isIntegralType(common, true)) {
    common = defaultFloatType();
    outType = common;
  }
  if (c.promotion == PromotionKind::AlwaysBool) outType = ScalarType::Bool;
  if (c.computeDtype) common = *c.computeDtype;
  if (c.outputDtype) outType = *c.outputDtype;
  computeDtype_ = common;

  for (int i = 0; i < noutputs_; ++i) {
    Tensor& out = operands_[size_t(i)];
    if (!out.defined()) {
      continue; // allocated by allocateOutputs
    }
    if (c.checkOutputCast) {
      KILN_CHECK(canCast(outType, out.dtype()), opName_, ": result type ",
                 scalarTypeShortName(outType), " can't be cast to the desired output type ",
                 scalarTypeShortName(out.dtype()));
    }
  }
  outputDtypeHint_ = outType;
  if (c.castInputs) {
    for (size_t i = 0; i < c.inputs.size(); ++i) {
      bool keep = i < c.keepInputDtype.size() && c.keepInputDtype[i];
      Tensor& in = operands_[size_t(noutputs_) + i];
      if (keep || in.dtype() == common) continue;
      // A 0-d CPU input (a Python number, mostly) is converted in place of a dispatched cast.
      if (in.dim() == 0 && in.device().isCpu()) {
        bool wrapped = in.isWrappedNumber();
        in = Tensor::scalarTensor(in.item(), common);
        in.impl()->isWrappedNumber = wrapped;
      } else {
        in = ops::to(in, common);
      }
    }
  }
}

void TensorIterator::computeShape() {
  bool first = true;
  for (const Tensor& t : operands_) {
    if (!t.defined()) continue;
    shape_ = first ? DimVector(t.sizes()) : broadcastShapes(opName_, shape_, t.sizes());
    first = false;
  }
  // Given outputs must already have the broadcast shape (in-place ops cannot grow self).
  for (int i = 0; i < noutputs_; ++i) {
    const Tensor& out = operands_[size_t(i)];
    if (out.defined()) {
      KILN_CHECK(DimVector(out.sizes()) == shape_, opName_, ": output with shape ",
                 out.shapeString(), " doesn't match the broadcast shape ", shapeString(shape_));
    }
  }
  numel_ = computeNumel(shape_);
}

void TensorIterator::allocateOutputs(const TensorIteratorConfig& c) {
  size_t ndim = shape_.size();
  // Output layout as PyTorch picks it: for two dims, the first input whose strides differ on
  // them (ignoring broadcast and size-1 dims) decides which is outer; ties keep the order.
  auto strideOf = [&](const Tensor& t, size_t d) -> int64_t {
    size_t offset = ndim - size_t(t.dim());
    if (d < offset || t.sizes()[d - offset] == 1) return 0;
    return t.strides()[d - offset];
  };
  auto outer = [&](size_t a, size_t b) { // should dim a be outside dim b?
    for (int k = noutputs_; k < ntensors(); ++k) {
      const Tensor& t = operands_[size_t(k)];
      int64_t sa = strideOf(t, a), sb = strideOf(t, b);
      if (sa == 0 || sb == 0 || sa == sb) continue;
      return sa > sb;
    }
    return a < b;
  };
  bool allContiguous = true;
  for (int k = noutputs_; k < ntensors(); ++k) allContiguous = allContiguous && operands_[size_t(k)].isContiguous();
  DimVector perm(ndim); // outermost first
  for (size_t d = 0; d < ndim; ++d) perm[d] = int64_t(d);
  if (!allContiguous) {
    for (size_t i = 1; i < ndim; ++i) // insertion sort: safe with a comparator that is not a strict order
      for (size_t j = i; j > 0 && outer(size_t(perm[j]), size_t(perm[j - 1])); --j) std::swap(perm[j], perm[j - 1]);
  }
  // The device of the first input that is not a CPU scalar (CPU scalars mix with any device).
  Device device = noutputs_ < ntensors() ? operands_[size_t(noutputs_)].device() : Device();
  for (int k = noutputs_; k < ntensors(); ++k) {
    const Tensor& t = operands_[size_t(k)];
    if (!(t.dim() == 0 && t.device().isCpu())) {
      device = t.device();
      break;
    }
  }
  for (int i = 0; i < noutputs_; ++i) {
    if (operands_[size_t(i)].defined()) continue;
    DimVector strides(ndim);
    int64_t acc = 1;
    for (size_t j = ndim; j-- > 0;) {
      strides[size_t(perm[j])] = acc;
      acc *= std::max<int64_t>(shape_[size_t(perm[j])], 1);
    }
    operands_[size_t(i)] = Tensor::emptyStrided(shape_, strides, outputDtypeHint_, device);
  }
}

void TensorIterator::buildIteration() {
  size_t ndim = shape_.size();
  size_t nt = operands_.size();
  // Fast path: every operand is contiguous with the full shape, or a single element
  // (x + 1, x * y of equal shapes): one flat run, no sorting or coalescing.
  bool flat = true;
  for (size_t k = 0; k < nt && flat; ++k) {
    const Tensor& t = operands_[k];
    flat = t.numel() == 1 || (t.isContiguous() && t.numel() == numel_ && size_t(t.dim()) == ndim);
  }
  if (flat) {
    iterShape_.assign(size_t(1), numel_);
    iterStrides_.assign(nt, DimVector(1));
    for (size_t k = 0; k < nt; ++k)
      iterStrides_[k][0] = operands_[k].numel() == 1 && numel_ != 1 ? 0 : int64_t(elementSize(operands_[k].dtype()));
    return;
  }
  // Byte strides over the broadcast shape, outermost-first.
  std::vector<DimVector> strides(nt, DimVector(ndim));
  for (size_t k = 0; k < nt; ++k) {
    const Tensor& t = operands_[k];
    size_t offset = ndim - size_t(t.dim());
    int64_t es = int64_t(elementSize(t.dtype()));
    for (size_t d = 0; d < ndim; ++d) {
      if (d < offset) continue;
      int64_t sz = t.sizes()[d - offset];
      strides[k][d] = sz == 1 ? 0 : t.strides()[d - offset] * es;
    }
  }
  // Order dims innermost-first by the output's strides (smallest stride innermost).
  std::vector<size_t> order(ndim);
  std::iota(order.begin(), order.end(), 0);
  std::stable_sort(order.begin(), order.end(), [&](size_t a, size_t b) {
    for (size_t k = 0; k < nt; ++k) {
      int64_t sa = strides[k][a], sb = strides[k][b];
      if (sa == 0 || sb == 0) continue;
      if (sa != sb) return sa < sb;
    }
    return a > b;
  });
  iterShape_.clear();
  iterStrides_.assign(nt, DimVector());
  for (size_t d : order) {
    if (shape_[d] == 1) continue;
    bool merged = false;
    if (!iterShape_.empty()) {
      bool canMerge = true;
      for (size_t k = 0; k < nt && canMerge; ++k)
        canMerge = strides[k][d] == iterStrides_[k].back() * iterShape_.back();
      if (canMerge) {
        iterShape_[iterShape_.size() - 1] *= shape_[d];
        merged = true;
      }
    }
    if (!merged) {
      iterShape_.push_back(shape_[d]);
      for (size_t k = 0; k < nt; ++k) iterStrides_[k].push_back(strides[k][d]);
    }
  }
  if (iterShape_.empty()) {
    iterShape_.push_back(1);
    for (size_t k = 0; k < nt; ++k) iterStrides_[k].push_back(0);
  }
}

void TensorIterator::serialRange(const Loop& loop, int64_t begin, int64_t end) const {
  size_t nd = iterShape_.size();
  size_t nt = operands_.size();
  KILN_CHECK(nt <= kMaxOperands, opName_, ": too many operands (", nt, ")");
  // Multi-index of `begin`, innermost-first.
  DimVector idx(nd);
  int64_t rem = begin;
  for (size_t d = 0; d < nd; ++d) {
    idx[d] = rem % iterShape_[d];
    rem /= iterShape_[d];
  }
  char* base[kMaxOperands];
  char* ptrs[kMaxOperands];
  int64_t inner[kMaxOperands];
  for (size_t k = 0; k < nt; ++k) {
    base[k] = operands_[k].rawData();
    inner[k] = iterStrides_[k][0];
  }
  int64_t pos = begin;
  while (pos < end) {
    int64_t n = std::min(iterShape_[0] - idx[0], end - pos);
    for (size_t k = 0; k < nt; ++k) {
      char* p = base[k];
      for (size_t d = 0; d < nd; ++d) p += idx[d] * iterStrides_[k][d];
      ptrs[k] = p;
    }
    loop(ptrs, inner, n);
    pos += n;
    idx[0] += n;
    for (size_t d = 0; d + 1 < nd && idx[d] == iterShape_[d]; ++d) {
      idx[d] = 0;
      idx[d + 1]++;
    }
  }
}

void TensorIterator::forEach(const Loop& loop, int64_t grainSize) const {
  if (numel_ == 0 || isMeta_) return;
  int threads = omp_get_max_threads();
  if (numel_ < grainSize || threads <= 1 || omp_in_parallel()) {
    serialRange(loop, 0, numel_);
    return;
  }
  int64_t chunks = std::min<int64_t>(threads, (numel_ + grainSize - 1) / grainSize);
#pragma omp parallel for num_threads(int(chunks)) schedule(static)
  for (int64_t c = 0; c < chunks; ++c) {
    int64_t b = numel_ * c / chunks, e = numel_ * (c + 1) / chunks;
    serialRange(loop, b, e);
  }
}

} // namespace kiln
