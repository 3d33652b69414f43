// Creation prims: iota (an integer range), full, empty_strided and the random uniform / normal,
// with dtype and device always given (the decompositions of ATen's factories resolve the
// defaults).
#include "generated/KernelDecls.h"
#include <cstdint>

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

Tensor primsUniform(IntArrayRef shape, double low, double high, ScalarType dtype, Device device) {
  KILN_CHECK(isFloatingType(dtype), "prims.uniform: dtype must be a floating dtype, got ",
             scalarTypeName(dtype));
  return uniform_(empty(shape, dtype, device), low, high);
}

Tensor primsNormal(IntArrayRef shape, double mean, double std, ScalarType dtype, Device device) {
  KILN_CHECK(isFloatingType(dtype), "prims.normal: dtype must be a floating dtype, got ",
             scalarTypeName(dtype));
  return normal_(empty(shape, dtype, device), mean, std);
}

} // namespace kiln::kernels
