// The Complex key's reductions: sum and mean reduce the real and imaginary parts alike, so they
// run on view_as_real over the same dims (the trailing pair dim kept).
#include "generated/KernelDecls.h"
#include "generated/Ops.h"
#include "runtime/Error.h"
#include "runtime/complex/ComplexParts.h"

namespace kiln::kernels {

namespace {

// The dims of the complex tensor as dims of its pairs (all of them when none are given).
std::vector<int64_t> pairDims(const Tensor& self, std::optional<IntArrayRef> dim) {
  std::vector<int64_t> out;
  if (self.dim() == 0) return out; // dim 0 / -1 of a 0-d tensor names no dim to reduce
  if (!dim || dim->size() == 0) {
    for (int64_t d = 0; d < self.dim(); ++d)
      out.push_back(d);
    return out;
  }
  for (int64_t d : *dim)
    out.push_back(complex::realViewDim(d, self.dim()));
  return out;
}

std::optional<ScalarType> pairDtype(const char* op, std::optional<ScalarType> dtype) {
  if (!dtype) return std::nullopt;
  KILN_CHECK(isComplexType(*dtype), op, "(): a complex input needs a complex dtype=, got ",
             scalarTypeName(*dtype));
  return toRealValueType(*dtype);
}

Tensor reducePairs(const char* op, const Tensor& self, std::optional<IntArrayRef> dim,
                   bool keepdim, std::optional<ScalarType> dtype, bool mean) {
  std::vector<int64_t> dims = pairDims(self, dim);
  Tensor pairs = ops::view_as_real(self);
  std::optional<ScalarType> real = pairDtype(op, dtype);
  if (dims.empty()) return ops::view_as_complex(ops::clone(real ? ops::_to_copy(pairs, *real, std::nullopt) : pairs));
  Tensor r = mean ? ops::mean(pairs, IntArrayRef(dims.data(), dims.size()), keepdim, real)
                  : ops::sum(pairs, IntArrayRef(dims.data(), dims.size()), keepdim, real);
  return ops::view_as_complex(ops::contiguous(r));
}

} // namespace

Tensor complexSum(const Tensor& self, std::optional<ScalarType> dtype) {
  return reducePairs("sum", self, std::nullopt, false, dtype, false);
}
Tensor complexSumDim(const Tensor& self, std::optional<IntArrayRef> dim, bool keepdim,
                     std::optional<ScalarType> dtype) {
  return reducePairs("sum", self, dim, keepdim, dtype, false);
}
Tensor complexMean(const Tensor& self, std::optional<ScalarType> dtype) {
  return reducePairs("mean", self, std::nullopt, false, dtype, true);
}
Tensor complexMeanDim(const Tensor& self, std::optional<IntArrayRef> dim, bool keepdim,
                      std::optional<ScalarType> dtype) {
  return reducePairs("mean", self, dim, keepdim, dtype, true);
}

} // namespace kiln::kernels
