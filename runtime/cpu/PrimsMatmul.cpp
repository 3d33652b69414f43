// Matrix-product prims: mm (2-d) and bmm (3-d, batched) of operands of one dtype; the eager
// BLAS-backed kernels do the work.
#include "generated/KernelDecls.h"
#include <cstdint>

namespace kiln::kernels {

namespace {

void checkMatmulOperands(const char* op, const Tensor& a, const Tensor& b, int64_t ndim) {
  KILN_CHECK(a.dim() == ndim && b.dim() == ndim, op, ": expected ", ndim,
             "-d tensors, got ", a.shapeString(), " and ", b.shapeString());
  KILN_CHECK(a.dtype() == b.dtype(), op,
             ": operands must have equal dtypes (prims do not promote), got ",
             scalarTypeName(a.dtype()), " and ", scalarTypeName(b.dtype()));
}

} // namespace

Tensor primsMm(const Tensor& self, const Tensor& mat2) {
  checkMatmulOperands("prims.mm", self, mat2, 2);
  return mm(self, mat2);
}

Tensor primsBmm(const Tensor& self, const Tensor& mat2) {
  checkMatmulOperands("prims.bmm", self, mat2, 3);
  return bmm(self, mat2);
}

} // namespace kiln::kernels
