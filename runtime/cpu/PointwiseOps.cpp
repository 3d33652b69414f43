// Shared pieces of the pointwise kernels: result dtypes, in-place execution, PyTorch's checks.
#include "runtime/cpu/PointwiseOps.h"

#include "generated/Ops.h"
#include "runtime/cpu/Loops.h"
#include <cstdint>

namespace kiln::cpu {

ScalarType pointwiseResultType(const std::vector<Tensor>& inputs, PromotionKind kind) {
  ScalarType t = resultType(inputs);
  if (kind == PromotionKind::IntToFloat && isIntegralType(t, true)) return ScalarType::Float32;
  if (kind == PromotionKind::AlwaysBool) return ScalarType::Bool;
  return t;
}

namespace {

bool sameView(const Tensor& a, const Tensor& b) {
  return a.rawData() == b.rawData() && a.sizes() == b.sizes() && a.strides() == b.strides() &&
         a.dtype() == b.dtype();
}

// Whether the memory spans of two tensors intersect (views of one buffer may come through
// different storages, e.g. two from_numpy calls on views of one array).
bool spansOverlap(const Tensor& a, const Tensor& b) {
  if (a.numel() == 0 || b.numel() == 0 || a.isMeta() || b.isMeta()) return false;
  auto span = [](const Tensor& t) {
    int64_t extent = 1;
    for (int64_t d = 0; d < t.dim(); ++d)
      extent += (t.sizes()[size_t(d)] - 1) * t.strides()[size_t(d)];
    const char* begin = t.rawData();
    return std::pair<const char*, const char*>(begin,
                                               begin + extent * int64_t(elementSize(t.dtype())));
  };
  auto [aBegin, aEnd] = span(a);
  auto [bBegin, bEnd] = span(b);
  return aBegin < bEnd && bBegin < aEnd;
}

// More than one element of `t` at one address (an expanded tensor): writing it is ambiguous.
// An empty tensor has no elements to write (numpy gives them all-zero strides).
bool hasInternalOverlap(const Tensor& t) {
  if (t.numel() == 0) return false;
  for (int64_t d = 0; d < t.dim(); ++d)
    if (t.sizes()[size_t(d)] > 1 && t.strides()[size_t(d)] == 0) return true;
  return false;
}

} // namespace

Tensor runInplace(const char* op, const Tensor& self, ScalarType resultType,
                  const std::vector<Tensor>& others,
                  const std::function<Tensor(const Tensor& out)>& compute) {
  KILN_CHECK(canCast(resultType, self.dtype()), op, ": result type ",
             scalarTypeShortName(resultType), " can't be cast to the desired output type ",
             scalarTypeShortName(self.dtype()));
  KILN_CHECK(!hasInternalOverlap(self), op,
             ": unsupported operation: more than one element of the written-to tensor refers to a "
             "single memory location. Please clone() the tensor before performing the operation.");
  bool direct = resultType == self.dtype();
  for (const Tensor& o : others) {
    if (direct && o.defined() && spansOverlap(o, self) && !sameView(o, self)) direct = false;
  }
  if (direct) {
    compute(self);
    self.bumpVersion();
    return self;
  }
  Tensor result = compute(Tensor());
  KILN_CHECK(result.sizes() == self.sizes(), op, ": output with shape ", self.shapeString(),
             " doesn't match the broadcast shape ", result.shapeString());
  ops::copy_(self, result, false);
  return self;
}

TensorIterator unaryAs(const char* op, const Tensor& self, ScalarType dtype, const Tensor& out) {
  TensorIteratorConfig c;
  c.opName = op;
  c.outputs = {out};
  c.inputs = {self};
  c.computeDtype = dtype;
  c.outputDtype = dtype;
  return TensorIterator(std::move(c));
}

bool isReducedFloatScalarCase(const Tensor& self, const Tensor& other, ScalarType result) {
  return (result == ScalarType::Float16 || result == ScalarType::BFloat16) && other.numel() == 1 &&
         other.dim() <= self.dim() && !other.isMeta() && !self.isMeta();
}

void throwNotImplemented(const char* kernel, ScalarType t) {
  throw NotImplementedError(
      strCat("\"", kernel, "\" not implemented for '", scalarTypeShortName(t), "'"));
}

void checkNotNumber(const char* op, const Tensor& t, const char* argName, int position) {
  if (!t.isWrappedNumber()) return;
  const char* kind = t.dtype() == ScalarType::Bool ? "bool"
                     : isFloatingType(t.dtype())   ? "float"
                                                   : "int";
  throw TypeError(strCat(op, "(): argument '", argName, "' (position ", position,
                         ") must be Tensor, not ", kind));
}

namespace {

// Visits the elements of `t` in one thread, stopping once `visit(element pointer)` returns true.
// Returns whether it stopped early.
template <typename T, typename Visit> bool findElement(const Tensor& t, const Visit& visit) {
  TensorIteratorConfig c;
  c.opName = "scan";
  c.inputs = {t};
  c.promotion = PromotionKind::None;
  TensorIterator scan(std::move(c));
  bool found = false;
  scan.forEach(
      [&](char** data, const int64_t* strides, int64_t n) {
        for (int64_t i = 0; i < n && !found; ++i)
          found = visit(*reinterpret_cast<const T*>(data[0] + i * strides[0]));
      },
      std::numeric_limits<int64_t>::max());
  return found;
}

} // namespace

void checkNoIntegerZero(const TensorIterator& iter, int divisorInput) {
  if (iter.isMeta() || iter.numel() == 0 || !isIntegralType(iter.computeDtype(), true)) return;
  const Tensor& divisor = iter.input(divisorInput);
  bool zero = KILN_DISPATCH_ALL(divisor.dtype(), "ZeroDivisionError", [&]<typename T>() {
    return findElement<T>(divisor, [](T v) { return v == T(0); });
  });
  KILN_CHECK(!zero, "ZeroDivisionError");
}

bool allTrue(const Tensor& t) {
  KILN_CHECK(t.dtype() == ScalarType::Bool, "allTrue: expected a bool tensor");
  return !findElement<bool>(t, [](bool v) { return !v; });
}

const char* c10TypeName(ScalarType t) {
  static constexpr const char* names[] = {"bool",  "uint8_t", "int8_t",    "int16_t",
                                          "int",   "int64_t", "c10::Half", "c10::BFloat16",
                                          "float", "double", "c10::complex<float>", "c10::complex<double>"};
  return names[int(t)];
}

} // namespace kiln::cpu
