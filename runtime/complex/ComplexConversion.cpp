// The Complex key's copies and conversions: copy_, _to_copy, clone, cat and the prims copies,
// done on view_as_real views (a real source fills the real parts and zeroes the imaginary ones;
// a complex source written into a real tensor drops its imaginary part with torch's warning).
#include "generated/KernelDecls.h"
#include "generated/Ops.h"
#include "runtime/Error.h"
#include "runtime/Warning.h"
#include "runtime/complex/ComplexParts.h"

namespace kiln::kernels {

namespace {

void warnDiscardedImaginary() {
  warn("Casting complex values to real discards the imaginary part");
}

// src written into dst, where one of them (at least) is complex.
void copyInto(const Tensor& dst, const Tensor& src) {
  if (!isComplexType(dst.dtype())) {
    warnDiscardedImaginary();
    ops::copy_(dst, ops::select(ops::view_as_real(src), -1, 0), false);
    return;
  }
  Tensor pairs = ops::view_as_real(dst);
  if (isComplexType(src.dtype())) {
    // A 0-d or broadcast complex source: its pairs broadcast as the destination's do.
    ops::copy_(pairs, ops::view_as_real(src), false);
    return;
  }
  ops::copy_(ops::select(pairs, -1, 0), src, false);
  ops::fill_(ops::select(pairs, -1, 1), Scalar(0.0));
}

} // namespace

Tensor complexCopy_(const Tensor& self, const Tensor& src, bool) {
  copyInto(self, src);
  return self;
}

Tensor complexToCopy(const Tensor& self, std::optional<ScalarType> dtype, std::optional<Device> device) {
  ScalarType to = dtype.value_or(self.dtype());
  Device where = device.value_or(self.device());
  if (isComplexType(self.dtype()) && isComplexType(to)) {
    Tensor pairs = ops::_to_copy(ops::view_as_real(self), toRealValueType(to), where);
    return ops::view_as_complex(pairs);
  }
  if (isComplexType(self.dtype())) {
    warnDiscardedImaginary();
    return ops::_to_copy(ops::select(ops::view_as_real(self), -1, 0), to, where);
  }
  Tensor re = ops::_to_copy(self, toRealValueType(to), where);
  return complex::fromParts(re, Tensor());
}

Tensor complexClone(const Tensor& self) {
  return ops::view_as_complex(ops::clone(ops::view_as_real(self)));
}

Tensor complexCat(const std::vector<Tensor>& tensors, int64_t dim) {
  KILN_CHECK(!tensors.empty(), "torch.cat(): expected a non-empty list of Tensors");
  ScalarType out = tensors[0].dtype();
  for (const Tensor& t : tensors) {
    // (their pairs have a dim: cat would join the pairs themselves)
    KILN_CHECK(t.dim() > 0, "zero-dimensional tensor cannot be concatenated");
    out = promoteTypes(out, t.dtype());
  }
  int64_t ndim = tensors[0].dim();
  std::vector<Tensor> pairs;
  for (const Tensor& t : tensors) {
    Tensor c = t.dtype() == out ? t : ops::_to_copy(t, out, std::nullopt);
    pairs.push_back(ops::view_as_real(c));
  }
  return ops::view_as_complex(ops::cat(pairs, complex::realViewDim(dim, ndim)));
}

Tensor complexPrimsConvertElementType(const Tensor& a, ScalarType dtype) {
  return complexToCopy(a, dtype, std::nullopt);
}

Tensor complexPrimsCopyTo(const Tensor& a, const Tensor& b) {
  copyInto(a, b);
  return a;
}

Tensor complexPrimsClone(const Tensor& a) { return complexClone(a); }

Tensor complexPrimsReshape(const Tensor& a, IntArrayRef shape) {
  DimVector withPair(shape);
  withPair.push_back(2);
  return ops::view_as_complex(ops::contiguous(ops::prims::reshape(ops::view_as_real(a), withPair)));
}

} // namespace kiln::kernels
