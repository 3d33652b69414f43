// Creation prims: iota (an integer range), full and empty_strided, with dtype and device always
// given (the decompositions of ATen's factories resolve the defaults).
#include "generated/KernelDecls.h"

namespace kiln::kernels {

Tensor primsIota(int64_t length, int64_t start, int64_t step, ScalarType dtype, Device device) {
  const char* op = "prims.iota";
  KILN_CHECK(isIntegralType(dtype, /*includeBool=*/false), op,
             ": dtype must be an integer dtype, got ", scalarTypeName(dtype));
  KILN_CHECK(length >= 0, op, ": length must be non-negative, got ", length);
  KILN_CHECK(step != 0, op, ": step must be nonzero");
  return arangeStartStep(Scalar(start), Scalar(start + step * length), Scalar(step), dtype, device);
}

Tensor primsFull(IntArrayRef shape, const Scalar& fillValue, ScalarType dtype, Device device) {
  return full(shape, fillValue, dtype, device);
}

Tensor primsEmptyStrided(IntArrayRef shape, IntArrayRef strides, ScalarType dtype, Device device) {
  return emptyStrided(shape, strides, dtype, device);
}

} // namespace kiln::kernels
