// cat: concatenation along a dim with PyTorch's dtype promotion across inputs and its legacy
// rule that 1-D empty tensors are skipped whatever their shape elsewhere.
#include "generated/KernelDecls.h"
#include "generated/Ops.h"
#include "runtime/TensorIterator.h"
#include <cstdint>

namespace kiln::kernels {

namespace {
bool skippedInCat(const Tensor& t) { return t.dim() == 1 && t.numel() == 0; }
} // namespace

Tensor cat(const std::vector<Tensor>& tensors, int64_t dim) {
  KILN_CHECK_VALUE(!tensors.empty(), "cat(): expected a non-empty list of Tensors");
  for (size_t i = 0; i < tensors.size(); ++i) {
    KILN_CHECK(tensors[i].dim() > 0, "zero-dimensional tensor (at position ", i,
               ") cannot be concatenated");
    KILN_CHECK(tensors[i].device() == tensors[0].device(),
               "Expected all tensors to be on the same device, but found at least two devices, ",
               tensors[0].device().str(), " and ", tensors[i].device().str(), "!");
  }
  ScalarType dtype = resultType(tensors);
  const Tensor* ref = nullptr;
  for (const Tensor& t : tensors) {
    if (!skippedInCat(t)) {
      ref = &t;
      break;
    }
  }
  if (!ref) return Tensor::empty({0}, dtype, tensors[0].device());
  dim = wrapDim(dim, ref->dim());
  DimVector sizes(ref->sizes());
  sizes[size_t(dim)] = 0;
  for (size_t i = 0; i < tensors.size(); ++i) {
    const Tensor& t = tensors[i];
    if (skippedInCat(t)) continue;
    KILN_CHECK(t.dim() == ref->dim(), "Tensors must have same number of dimensions: got ",
               ref->dim(), " and ", t.dim());
    for (int64_t d = 0; d < t.dim(); ++d) {
      if (d == dim) continue;
      KILN_CHECK(t.sizes()[size_t(d)] == ref->sizes()[size_t(d)],
                 "Sizes of tensors must match except in dimension ", dim, ". Expected size ",
                 ref->sizes()[size_t(d)], " but got size ", t.sizes()[size_t(d)],
                 " for tensor number ", i, " in the list.");
    }
    sizes[size_t(dim)] += t.sizes()[size_t(dim)];
  }
  Tensor out = Tensor::empty(sizes, dtype, ref->device());
  if (out.isMeta()) return out;
  int64_t offset = 0;
  for (const Tensor& t : tensors) {
    if (skippedInCat(t) || t.sizes()[size_t(dim)] == 0) continue;
    int64_t n = t.sizes()[size_t(dim)];
    ops::copy_(ops::slice(out, dim, offset, offset + n, 1), t, false);
    offset += n;
  }
  return out;
}

} // namespace kiln::kernels
