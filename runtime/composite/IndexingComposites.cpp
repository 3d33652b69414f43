// Indexing ops written in other ops: argsort/msort (sort), nonzero's tuple form and
// where(condition), argwhere, searchsorted of a number, and repeat_interleave (index_select with
// the indices repeat_interleave(repeats) gives).
#include "generated/KernelDecls.h"
#include "generated/Ops.h"

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
  Tensor counts = ops::full({1}, Scalar(repeats), ScalarType::Int64, self.device());
  return ops::repeatInterleaveTensor(self, counts, dim, outputSize);
}

} // namespace kiln::kernels
