// The Complex key's fallback (see ComplexFallback.h).
#include "runtime/complex/ComplexFallback.h"

#include <string>

#include "runtime/Dispatcher.h"
#include "runtime/Error.h"

namespace kiln::complex {

namespace {

// Ops that only allocate or re-point geometry: their kernels never read an element's value.
bool isLayoutOnly(const OpSchema& s) {
  if (s.hasTag(kTagView)) return true;
  const std::string name = s.qualifiedName();
  return name == "empty" || name == "empty_strided" || name == "empty_like" || name == "new_empty";
}

// The first complex dtype among the tensor and dtype arguments (for the error message).
ScalarType firstComplexDtype(const Stack& stack) {
  for (const Value& v : stack) {
    if (v.isTensor() && v.toTensor().defined() && isComplexType(v.toTensor().dtype()))
      return v.toTensor().dtype();
    if (v.isTensorList())
      for (const Tensor& t : v.toTensorList())
        if (t.defined() && isComplexType(t.dtype())) return t.dtype();
    if (v.isScalarType() && isComplexType(v.toScalarType())) return v.toScalarType();
  }
  return ScalarType::ComplexFloat;
}

void complexFallback(OpId op, DispatchKeySet remaining, Stack& stack) {
  Dispatcher& d = Dispatcher::instance();
  const OpSchema& s = d.schema(op);
  // Composites decompose into ops that reach this key again one by one.
  if (isLayoutOnly(s) || d.hasKernel(op, DispatchKey::CompositeImplicit))
    return d.redispatch(op, remaining, stack);
  throw NotImplementedError(strCat("\"", s.qualifiedName(), "\" not implemented for '",
                                   scalarTypeShortName(firstComplexDtype(stack)),
                                   "' (kiln's complex support: docs/complex.md)"));
}

} // namespace

void registerComplexFallback(Dispatcher& d) {
  d.registerFallback(DispatchKey::Complex, complexFallback);
  registerComplexMathKernels(d);
}

} // namespace kiln::complex
