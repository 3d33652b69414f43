// Non-core views, masking and rearrangements in core ATen ops (permute, squeeze.dims, alias,
// where, index_select), following torch/_refs (transpose, t, squeeze, detach, masked_fill,
// tril, triu, roll).
#include "compiler/decompositions/CoreAtenSupport.h"
#include "generated/DecompositionDecls.h"
#include <cstdint>

namespace kiln::decompositions {

Tensor transpose(const Tensor& self, int64_t dim0, int64_t dim1) {
  int64_t n = self.dim();
  std::vector<int64_t> perm;
  for (int64_t d = 0; d < n; ++d)
    perm.push_back(d);
  if (n > 0) std::swap(perm[size_t(wrapDim(dim0, n))], perm[size_t(wrapDim(dim1, n))]);
  return ops::permute(self, perm);
}

Tensor t(const Tensor& self) { return transpose(self, 0, self.dim() < 2 ? 0 : 1); }

Tensor squeezeAll(const Tensor& self) {
  std::vector<int64_t> dims;
  for (int64_t d = 0; d < self.dim(); ++d)
    if (self.sizes()[size_t(d)] == 1) dims.push_back(d);
  return ops::squeeze(self, IntArrayRef(dims));
}

Tensor detach(const Tensor& self) { return ops::alias(self); }

Tensor maskedFillScalar(const Tensor& self, const Tensor& mask, const Scalar& value) {
  return ops::where(mask, ops::scalar_tensor(value, self.dtype(), self.device()), self);
}

Tensor maskedFillTensor(const Tensor& self, const Tensor& mask, const Tensor& value) {
  return ops::where(mask, convert(value, self.dtype()), self);
}

namespace {

// Keeps the elements whose column minus row (over the last two dims) passes `keep`, zeroes
// the others.
template <typename Keep>
Tensor triangle(const Tensor& self, Keep keep) {
  int64_t rows = self.sizes()[size_t(self.dim() - 2)], cols = self.sizes()[size_t(self.dim() - 1)];
  auto range = [&](int64_t n) {
    return ops::arangeStep(Scalar(int64_t(0)), Scalar(n), Scalar(int64_t(1)), ScalarType::Int64,
                           self.device());
  };
  Tensor mask = keep(ops::sub(range(cols), ops::unsqueeze(range(rows), -1)));
  return ops::where(mask, self, ops::scalar_tensor(Scalar(int64_t(0)), self.dtype(), self.device()));
}

} // namespace

Tensor tril(const Tensor& self, int64_t diagonal) {
  return triangle(self, [&](const Tensor& d) { return ops::le(d, Scalar(diagonal)); });
}

Tensor triu(const Tensor& self, int64_t diagonal) {
  return triangle(self, [&](const Tensor& d) { return ops::ge(d, Scalar(diagonal)); });
}

// Each rolled dim gathers its elements from (size - shift + i) % size (torch._refs.roll); no
// dims rolls the flattened tensor.
Tensor roll(const Tensor& self, IntArrayRef shifts, IntArrayRef dims) {
  if (self.numel() == 0) return ops::clone(self);
  if (dims.empty())
    return ops::view(roll(ops::reshape(self, {-1}), shifts, IntArrayRef{0}), self.sizes());
  Tensor out = self;
  for (size_t i = 0; i < dims.size(); ++i) {
    int64_t d = wrapDim(dims[i], self.dim()), size = self.sizes()[size_t(d)];
    int64_t start = ((size - shifts[i]) % size + size) % size;
    Tensor index = ops::arangeStep(Scalar(start), Scalar(start + size), Scalar(int64_t(1)),
                                   ScalarType::Int64, self.device());
    out = ops::index_select(out, d, ops::remainder(index, Scalar(size)));
  }
  return out;
}

} // namespace kiln::decompositions
