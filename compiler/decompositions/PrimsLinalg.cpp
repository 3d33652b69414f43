// Core ATen -> Prims: matrix products (mm, bmm: their prims; addmm: prims.mm scaled and added
// with explicit broadcasting, after torch/_refs).
#include "compiler/decompositions/PrimsCommon.h"
#include "generated/DecompositionDecls.h"

namespace kiln::decompositions {

namespace P = kiln::ops::prims;

namespace {

void checkSameDtype(const char* op, const Tensor& a, const Tensor& b) {
  KILN_CHECK(a.dtype() == b.dtype(), op, ": expected m1 and m2 to have the same dtype, but got: ",
             scalarTypeName(a.dtype()), " != ", scalarTypeName(b.dtype()));
}

} // namespace

Tensor mm(const Tensor& self, const Tensor& mat2) {
  checkSameDtype("mm", self, mat2);
  return P::mm(self, mat2);
}

Tensor bmm(const Tensor& self, const Tensor& mat2) {
  checkSameDtype("bmm", self, mat2);
  return P::bmm(self, mat2);
}

// beta * self + alpha * (mat1 @ mat2); beta == 0 ignores self (NaN included), as PyTorch does.
Tensor addmm(const Tensor& self, const Tensor& mat1, const Tensor& mat2, const Scalar& beta,
             const Scalar& alpha) {
  checkSameDtype("addmm", mat1, mat2);
  KILN_CHECK(self.dtype() == mat1.dtype(), "addmm: self and mat2 must have the same dtype, but got ",
             scalarTypeName(self.dtype()), " and ", scalarTypeName(mat1.dtype()));
  // 16-bit floats: the product stays in f32 until the bias is added, so that the result is
  // rounded once as eager's (and PyTorch's) addmm rounds it; a 16-bit mm would round twice.
  ScalarType dtype = mat1.dtype(), compute = computationDtype(dtype);
  Tensor out = compute == dtype ? P::mm(mat1, mat2) : P::mm(convert(mat1, compute), convert(mat2, compute));
  if (alpha.toDouble() != 1.0) out = P::mul(out, filledLike(out, alpha));
  if (beta.toDouble() != 0.0) {
    Tensor bias = broadcastTo(convert(self, compute), out.sizes());
    if (beta.toDouble() != 1.0) bias = P::mul(bias, filledLike(bias, beta));
    out = P::add(bias, out);
  }
  return convert(out, dtype);
}

} // namespace kiln::decompositions
