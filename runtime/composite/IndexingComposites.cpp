// Indexing ops written in other ops: argsort/msort (sort), nonzero's tuple form and
// where(condition), argwhere, searchsorted of a number, and repeat_interleave (index_select with
// the indices repeat_interleave(repeats) gives).
#include "generated/KernelDecls.h"
#include "generated/Ops.h"
#include <cstdint>

namespace kiln::kernels {

Tensor argsort(const Tensor& self, int64_t dim, bool descending) {
  return std::get<1>(ops::sort(self, dim, descending));
}

Tensor argsortStable(const Tensor& self, bool stable, int64_t dim, bool descending) {
  return std::get<1>(ops::sortStable(self, stable, dim, descending));
}

Tensor msort(const Tensor& self) { return std::get<0>(ops::sort(self, 0, false)); }

namespace {

// cumsum_/cumprod_: the scan written back into self, whose dtype a dtype= must name.
Tensor scanInPlace(const Tensor& self, std::optional<ScalarType> dtype, const Tensor& scanned) {
  KILN_CHECK(!dtype || *dtype == self.dtype(), "Bad in-place call: input tensor dtype ",
             scalarTypeName(self.dtype()), " and output tensor dtype ", scalarTypeName(*dtype),
             " should match");
  return ops::copy_(self, scanned, false);
}

} // namespace

Tensor cumsum_(const Tensor& self, int64_t dim, std::optional<ScalarType> dtype) {
  return scanInPlace(self, dtype, ops::cumsum(self, dim, dtype ? dtype : self.dtype()));
}

Tensor cumprod_(const Tensor& self, int64_t dim, std::optional<ScalarType> dtype) {
  return scanInPlace(self, dtype, ops::cumprod(self, dim, dtype ? dtype : self.dtype()));
}

std::vector<Tensor> nonzeroNumpy(const Tensor& self) {
  // A 0-d tensor is indexed as one of shape [1].
  Tensor t = self.dim() == 0 ? ops::unsqueeze(self, 0) : self;
  return ops::unbind(ops::nonzero(t), 1);
}

Tensor argwhere(const Tensor& self) { return ops::nonzero(self); }

std::vector<Tensor> whereNonzero(const Tensor& condition) { return ops::nonzero_numpy(condition); }

Tensor searchsortedScalar(const Tensor& sortedSequence, const Scalar& self, bool outInt32,
                          bool right, const std::optional<std::string>& side,
                          const std::optional<Tensor>& sorter) {
  KILN_CHECK(sortedSequence.dim() == 1,
             "torch.searchsorted(): input value can be a scalar only when boundaries tensor "
             "dimension is 1, but we got boundaries tensor dim(",
             sortedSequence.dim(), ") and input value's dim(0) numel(1)");
  Tensor value = ops::scalar_tensor(self, self.naturalType(), sortedSequence.device());
  return ops::searchsorted(sortedSequence, value, outInt32, right, side, sorter);
}

Tensor repeatInterleaveTensor(const Tensor& self, const Tensor& repeats, std::optional<int64_t> dim,
                              std::optional<int64_t> outputSize) {
  // `x.repeat_interleave(2)` binds here (a number binds to a Tensor parameter): its count is
  // known, so the result's shape does not depend on data and the op runs on fakes too.
  if (repeats.impl()->isWrappedNumber && !repeats.isMeta() && !isFloatingType(repeats.dtype()))
    return repeatInterleaveInt(self, repeats.item().toInt(), dim, outputSize);
  Tensor input = dim ? self : ops::flatten(self);
  int64_t d = dim ? wrapDim(*dim, self.dim()) : 0;
  int64_t size = input.dim() == 0 ? 1 : input.sizes()[size_t(d)];
  Tensor counts = repeats;
  if (repeats.dim() == 0 || (repeats.dim() == 1 && repeats.sizes()[0] == 1))
    counts = ops::expand(ops::reshape(repeats, {1}), {size}, false);
  else if (repeats.dim() == 1)
    KILN_CHECK(repeats.sizes()[0] == size,
               "repeats must have the same size as input along dim, but got repeats.size(0) = ",
               repeats.sizes()[0], " and input.size(", d, ") = ", size);
  return ops::index_select(input, d, ops::repeat_interleave(counts, outputSize));
}

Tensor repeatInterleaveInt(const Tensor& self, int64_t repeats, std::optional<int64_t> dim,
                           std::optional<int64_t> outputSize) {
  KILN_CHECK(repeats >= 0, "repeats can not be negative");
  // Views, as PyTorch's reference: the result's shape does not depend on data (index_select
  // with repeat_interleave's indices would not run on fakes, so it would not compile).
  Tensor input = dim ? self : ops::flatten(self);
  int64_t d = input.dim() == 0 ? 0 : wrapDim(dim.value_or(0), input.dim());
  if (input.dim() == 0) input = ops::reshape(input, {1});
  int64_t size = input.sizes()[size_t(d)];
  if (outputSize)
    KILN_CHECK(*outputSize == size * repeats, "allocated size does not match required size");
  std::vector<int64_t> expanded(input.sizes().begin(), input.sizes().end());
  expanded.insert(expanded.begin() + d + 1, repeats);
  Tensor out = ops::flatten(ops::expand(ops::unsqueeze(input, d + 1), expanded, false), d, d + 1);
  return repeats == 1 ? ops::clone(out) : out; // a new tensor, never a view of self
}

} // namespace kiln::kernels
