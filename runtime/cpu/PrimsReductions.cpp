// Reduction prims: sum, prod, amax, amin, var over explicit dims (None: all; no dim is kept),
// with the input's dtype unless output_dtype says otherwise; argmax/argmin along one dim.
// They run the eager reduction kernels (16-bit floats accumulate in float there).
#include <cstdint>
#include <algorithm>
#include <vector>

#include "generated/KernelDecls.h"

namespace kiln::kernels {

namespace {

// Non-negative, in-range, distinct dims (the Prims IR spells dims out).
void checkReductionDims(const char* op, const Tensor& a, IntArrayRef dims) {
  std::vector<bool> seen(size_t(a.dim()), false);
  for (int64_t d : dims) {
    KILN_CHECK_INDEX(d >= 0 && d < a.dim(), op, ": dim ", d, " is out of range for a tensor of ",
                     a.dim(), " dims (prims take non-negative dims)");
    KILN_CHECK(!seen[size_t(d)], op, ": dim ", d, " appears more than once in ",
               shapeString(dims));
    seen[size_t(d)] = true;
  }
}

// An empty dims list reduces nothing (unlike ATen's sum(dim=[])): the result is the input
// converted to the result dtype.
bool reducesNothing(const std::optional<IntArrayRef>& dims) { return dims && dims->empty(); }

} // namespace

Tensor primsSum(const Tensor& inp, std::optional<IntArrayRef> dims,
                std::optional<ScalarType> outputDtype) {
  ScalarType dtype = outputDtype.value_or(inp.dtype());
  if (reducesNothing(dims)) return toCopy(inp, dtype, std::nullopt);
  if (dims) checkReductionDims("prims.sum", inp, *dims);
  return sumDim(inp, dims, false, dtype);
}

Tensor primsProd(const Tensor& inp, std::optional<IntArrayRef> dims,
                 std::optional<ScalarType> outputDtype) {
  ScalarType dtype = outputDtype.value_or(inp.dtype());
  if (reducesNothing(dims)) return toCopy(inp, dtype, std::nullopt);
  if (!dims) return prod(inp, dtype);
  checkReductionDims("prims.prod", inp, *dims);
  // One dim at a time, the highest first so the remaining dims keep their numbers.
  std::vector<int64_t> order(dims->begin(), dims->end());
  std::sort(order.rbegin(), order.rend());
  Tensor out = inp;
  for (int64_t d : order)
    out = prodDim(out, d, false, dtype);
  return out;
}

Tensor primsAmax(const Tensor& inp, std::optional<IntArrayRef> dims,
                 std::optional<ScalarType> outputDtype) {
  ScalarType dtype = outputDtype.value_or(inp.dtype());
  if (reducesNothing(dims)) return toCopy(inp, dtype, std::nullopt);
  if (dims) checkReductionDims("prims.amax", inp, *dims);
  Tensor out = amax(inp, dims.value_or(IntArrayRef{}), false);
  return out.dtype() == dtype ? out : toCopy(out, dtype, std::nullopt);
}

Tensor primsAmin(const Tensor& inp, std::optional<IntArrayRef> dims,
                 std::optional<ScalarType> outputDtype) {
  ScalarType dtype = outputDtype.value_or(inp.dtype());
  if (reducesNothing(dims)) return toCopy(inp, dtype, std::nullopt);
  if (dims) checkReductionDims("prims.amin", inp, *dims);
  Tensor out = amin(inp, dims.value_or(IntArrayRef{}), false);
  return out.dtype() == dtype ? out : toCopy(out, dtype, std::nullopt);
}

Tensor primsVar(const Tensor& inp, std::optional<IntArrayRef> dims,
                std::optional<double> correction, std::optional<ScalarType> outputDtype) {
  const char* op = "prims.var";
  KILN_CHECK(isFloatingType(inp.dtype()), op, ": expected a floating tensor, got ",
             scalarTypeName(inp.dtype()));
  KILN_CHECK(!reducesNothing(dims) || inp.dim() == 0, op,
             ": dims must name at least one dim (None: every dim)");
  if (dims) checkReductionDims(op, inp, *dims);
  Tensor out = varCorrection(inp, dims, Scalar(correction.value_or(1.0)), false);
  ScalarType dtype = outputDtype.value_or(inp.dtype());
  return out.dtype() == dtype ? out : toCopy(out, dtype, std::nullopt);
}

Tensor primsArgmax(const Tensor& inp, std::optional<int64_t> dim) {
  if (dim) checkReductionDims("prims.argmax", inp, IntArrayRef{*dim});
  return argmax(inp, dim, false);
}

Tensor primsArgmin(const Tensor& inp, std::optional<int64_t> dim) {
  if (dim) checkReductionDims("prims.argmin", inp, IntArrayRef{*dim});
  return argmin(inp, dim, false);
}

} // namespace kiln::kernels
