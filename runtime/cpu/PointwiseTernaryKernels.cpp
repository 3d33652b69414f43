// Pointwise ops of up to three operands: where(condition, self, other), clamp/clamp_min/clamp_max
// with number or tensor bounds, lerp with a number or tensor weight, and addcmul/addcdiv.
#include <cstdint>
#include <cmath>

#include "generated/KernelDecls.h"
#include "runtime/cpu/Loops.h"
#include "runtime/cpu/PointwiseOps.h"

namespace kiln::kernels {

namespace {

using cpu::runInplace;

// The dtype names PyTorch prints for a tensor's dtype (caffe2's TypeMeta names).
const char* typeMetaName(ScalarType t) {
  static constexpr const char* names[] = {"bool",  "unsigned char", "signed char", "short int",
                                          "int",   "long int",      "c10::Half",   "c10::BFloat16",
                                          "float", "double", "c10::complex<float>", "c10::complex<double>"};
  return names[int(t)];
}

// A Python number given to where must fit the result dtype (PyTorch converts it with c10's
// checked conversion for integral and float32 results).
void checkWhereNumber(const Tensor& t, ScalarType result) {
  if (!t.isWrappedNumber() || t.isMeta()) return;
  if (!isIntegralType(result, true) && result != ScalarType::Float32) return;
  KILN_DISPATCH_ALL(result, "where", [&]<typename T>() { cpu::checkedScalarTo<T>(t.item()); });
}

Tensor whereInto(const Tensor& condition, const Tensor& self, const Tensor& other) {
  KILN_CHECK(condition.dtype() == ScalarType::Bool || condition.dtype() == ScalarType::UInt8,
             "where expected condition to be a boolean tensor, but got a tensor with dtype ",
             scalarTypeShortName(condition.dtype()));
  TensorIteratorConfig c;
  c.opName = "where";
  c.outputs = {Tensor()};
  c.inputs = {condition, self, other};
  c.keepInputDtype = {true, false, false};
  c.promotion = PromotionKind::Default;
  ScalarType result = cpu::pointwiseResultType({self, other}, PromotionKind::Default);
  checkWhereNumber(self, result);
  checkWhereNumber(other, result);
  TensorIterator iter(std::move(c));
  if (iter.isMeta()) return iter.output();
  // A Bool condition is read as bytes too: GCC vectorizes a select on a uint8_t but branches on
  // a bool, and a random mask then mispredicts every other element (10x slower).
  KILN_DISPATCH_ALL(iter.computeDtype(), "where", [&]<typename T>() {
    cpu::cpuKernel(iter, [](uint8_t c, T a, T b) -> T { return c ? a : b; });
  });
  return iter.output();
}

// clamp with number bounds. The bounds take part in promotion as Python numbers do, are
// converted to the result dtype with c10's overflow check, and a NaN bound gives NaN.
Tensor clampScalarInto(const char* name, const Tensor& self, const std::optional<Scalar>& min,
                       const std::optional<Scalar>& max, const Tensor& out) {
  KILN_CHECK(min || max, "torch.clamp: At least one of 'min' or 'max' must not be None");
  std::vector<Tensor> parts{self};
  if (min) parts.push_back(Tensor::wrapScalar(*min));
  if (max) parts.push_back(Tensor::wrapScalar(*max));
  ScalarType result = cpu::pointwiseResultType(parts, PromotionKind::Default);
  auto iter = cpu::unaryAs(name, self, result, out);
  if (iter.isMeta()) return iter.output();
  if (result == ScalarType::Bool) {
    cpu::throwNotImplemented(min && max ? "clamp_scalar_cpu"
                             : min      ? "clamp_min_scalar_cpu"
                                        : "clamp_max_scalar_cpu",
                             result);
  }
  KILN_DISPATCH_NUMERIC(result, name, [&]<typename T>() {
    using M = opmath_t<T>;
    M lo = min ? M(cpu::checkedScalarTo<T>(*min)) : M(0);
    M hi = max ? M(cpu::checkedScalarTo<T>(*max)) : M(0);
    if constexpr (!std::is_integral_v<T>) {
      if ((min && lo != lo) || (max && hi != hi)) {
        cpu::cpuKernel(iter, [](T) -> T { return T(std::numeric_limits<M>::quiet_NaN()); });
        return;
      }
    }
    // `x < lo ? lo : x` keeps a NaN x (the comparison is false).
    if (min && max)
      cpu::cpuKernel(iter, [lo, hi](T a) -> T {
        M x = M(a);
        x = x < lo ? lo : x;
        return T(hi < x ? hi : x);
      });
    else if (min)
      cpu::cpuKernel(iter, [lo](T a) -> T { return M(a) < lo ? T(lo) : a; });
    else
      cpu::cpuKernel(iter, [hi](T a) -> T { return hi < M(a) ? T(hi) : a; });
  });
  return iter.output();
}

ScalarType clampScalarResultType(const Tensor& self, const std::optional<Scalar>& min,
                                 const std::optional<Scalar>& max) {
  std::vector<Tensor> parts{self};
  if (min) parts.push_back(Tensor::wrapScalar(*min));
  if (max) parts.push_back(Tensor::wrapScalar(*max));
  return cpu::pointwiseResultType(parts, PromotionKind::Default);
}

Tensor clampScalarInplace(const char* name, const Tensor& self, const std::optional<Scalar>& min,
                          const std::optional<Scalar>& max) {
  KILN_CHECK(min || max, "torch.clamp: At least one of 'min' or 'max' must not be None");
  return runInplace(name, self, clampScalarResultType(self, min, max), {},
                    [&](const Tensor& out) { return clampScalarInto(name, self, min, max, out); });
}

// clamp with tensor bounds. Both bounds: PyTorch's clamp_cpu (a NaN bound gives NaN, no bool);
// a single bound: maximum/minimum (NaN from either side propagates, bool allowed).
Tensor clampTensorInto(const char* name, const Tensor& self, const std::optional<Tensor>& min,
                       const std::optional<Tensor>& max, const Tensor& out) {
  KILN_CHECK(min || max, "torch.clamp: At least one of 'min' or 'max' must not be None");
  // Numbers reach this overload only mixed with a tensor bound, which PyTorch's parser rejects.
  KILN_CHECK_TYPE(!(min && min->isWrappedNumber()) && !(max && max->isWrappedNumber()), name,
                  "() received an invalid combination of arguments: a number and a tensor bound");
  TensorIteratorConfig c;
  c.opName = name;
  c.outputs = {out};
  c.inputs = {self};
  if (min) c.inputs.push_back(*min);
  if (max) c.inputs.push_back(*max);
  TensorIterator iter(std::move(c));
  if (iter.isMeta()) return iter.output();
  ScalarType t = iter.computeDtype();
  if (min && max) {
    if (t == ScalarType::Bool) cpu::throwNotImplemented("clamp_cpu", t);
    KILN_DISPATCH_NUMERIC(t, name, [&]<typename T>() {
      using M = opmath_t<T>;
      cpu::cpuKernel(iter, [](T a, T l, T h) -> T {
        M x = M(a), lo = M(l), hi = M(h);
        if (lo != lo || hi != hi) return T(std::numeric_limits<M>::quiet_NaN());
        x = x < lo ? lo : x;
        return T(hi < x ? hi : x);
      });
    });
    return iter.output();
  }
  bool isMin = bool(min);
  KILN_DISPATCH_ALL(t, name, [&]<typename T>() {
    using M = std::conditional_t<cpu::isReducedFloat<T>, float, T>;
    if constexpr (std::is_same_v<T, bool>) {
      if (isMin)
        cpu::cpuKernel(iter, [](bool a, bool b) -> bool { return a || b; });
      else
        cpu::cpuKernel(iter, [](bool a, bool b) -> bool { return a && b; });
    } else {
      cpu::cpuKernel(iter, [isMin](T a, T b) -> T {
        M x = M(a), bound = M(b);
        if constexpr (!std::is_integral_v<T>) {
          if (x != x || bound != bound) return T(std::numeric_limits<M>::quiet_NaN());
        }
        if (isMin) return x < bound ? b : a;
        return bound < x ? b : a;
      });
    }
  });
  return iter.output();
}

ScalarType clampTensorResultType(const Tensor& self, const std::optional<Tensor>& min,
                                 const std::optional<Tensor>& max) {
  std::vector<Tensor> parts{self};
  if (min) parts.push_back(*min);
  if (max) parts.push_back(*max);
  return cpu::pointwiseResultType(parts, PromotionKind::Default);
}

Tensor clampTensorInplace(const char* name, const Tensor& self, const std::optional<Tensor>& min,
                          const std::optional<Tensor>& max) {
  KILN_CHECK(min || max, "torch.clamp: At least one of 'min' or 'max' must not be None");
  std::vector<Tensor> others;
  if (min) others.push_back(*min);
  if (max) others.push_back(*max);
  return runInplace(name, self, clampTensorResultType(self, min, max), others,
                    [&](const Tensor& out) { return clampTensorInto(name, self, min, max, out); });
}

// PyTorch's lerp: the formula switches at |weight| = 0.5 for accuracy at both ends.
template <typename M> inline M lerpValue(M self, M end, M weight) {
  return std::abs(weight) < M(0.5) ? self + weight * (end - self)
                                   : end - (end - self) * (M(1) - weight);
}

void checkLerpDtype(const Tensor& self, const Tensor& t, const char* arg) {
  KILN_CHECK(self.dtype() == t.dtype(), "expected dtype ", typeMetaName(self.dtype()), " for `",
             arg, "` but got dtype ", typeMetaName(t.dtype()));
}

Tensor lerpScalarInto(const char* name, const Tensor& self, const Tensor& end, const Scalar& weight,
                      const Tensor& out) {
  cpu::checkNotNumber(name, end, "end", 2);
  checkLerpDtype(self, end, "end");
  auto iter = TensorIterator::binary(name, self, end, PromotionKind::None, out);
  if (iter.isMeta()) return iter.output();
  if (!isFloatingType(self.dtype())) cpu::throwNotImplemented("lerp_kernel_scalar", self.dtype());
  KILN_DISPATCH_FLOATING(iter.computeDtype(), name, [&]<typename T>() {
    using M = opmath_t<T>;
    M w = cpu::checkedScalarTo<M>(weight);
    cpu::cpuKernel(iter, [w](T a, T b) -> T { return T(lerpValue(M(a), M(b), w)); });
  });
  return iter.output();
}

Tensor lerpTensorInto(const char* name, const Tensor& self, const Tensor& end, const Tensor& weight,
                      const Tensor& out) {
  cpu::checkNotNumber(name, end, "end", 2);
  checkLerpDtype(self, end, "end");
  checkLerpDtype(self, weight, "weight");
  TensorIteratorConfig c;
  c.opName = name;
  c.outputs = {out};
  c.inputs = {self, end, weight};
  c.promotion = PromotionKind::None;
  TensorIterator iter(std::move(c));
  if (iter.isMeta()) return iter.output();
  if (!isFloatingType(self.dtype())) cpu::throwNotImplemented("lerp_kernel_tensor", self.dtype());
  KILN_DISPATCH_FLOATING(iter.computeDtype(), name, [&]<typename T>() {
    using M = opmath_t<T>;
    cpu::cpuKernel(iter, [](T a, T b, T w) -> T { return T(lerpValue(M(a), M(b), M(w))); });
  });
  return iter.output();
}

// addcmul/addcdiv: self + value * tensor1 * tensor2 (or / tensor2) in the promoted dtype of the
// three tensors (value takes no part in promotion and is converted to the computation type).
// The rounding is PyTorch's CPU kernels': addcmul's final multiply-add is one FMA, addcdiv
// rounds each step; 16-bit floats compute in float.
Tensor addcInto(const char* name, bool divide, const Tensor& self, const Tensor& tensor1,
                const Tensor& tensor2, const Scalar& value, const Tensor& out) {
  cpu::checkNotNumber(name, tensor1, "tensor1", 2);
  cpu::checkNotNumber(name, tensor2, "tensor2", 3);
  KILN_CHECK(!divide || !(isIntegralType(tensor1.dtype(), true) &&
                          isIntegralType(tensor2.dtype(), true)),
             "Integer division with addcdiv is no longer supported, and in a future  release "
             "addcdiv will perform a true division of tensor1 and tensor2. The historic addcdiv "
             "behavior can be implemented as (input + value * torch.trunc(tensor1 / "
             "tensor2)).to(input.dtype) for integer inputs and as (input + value * tensor1 / "
             "tensor2) for float inputs. The future addcdiv behavior is just the latter "
             "implementation: (input + value * tensor1 / tensor2), for all dtypes.");
  TensorIteratorConfig c;
  c.opName = name;
  c.outputs = {out};
  c.inputs = {self, tensor1, tensor2};
  c.promotion = PromotionKind::Default;
  TensorIterator iter(std::move(c));
  if (iter.isMeta()) return iter.output();
  ScalarType t = iter.computeDtype();
  if (t == ScalarType::Bool)
    cpu::throwNotImplemented(divide ? "addcdiv_cpu_out" : "addcmul_cpu_out", t);
  KILN_DISPATCH_NUMERIC(t, name, [&]<typename T>() {
    using M = opmath_t<T>;
    M v = cpu::checkedScalarTo<M>(value);
    if (divide) {
      cpu::cpuKernel(iter, [v](T a, T b, T d) -> T { return T(M(a) + v * M(b) / M(d)); });
    } else if constexpr (std::is_floating_point_v<M>) {
      cpu::cpuKernel(iter, [v](T a, T b, T d) -> T { return T(std::fma(v * M(b), M(d), M(a))); });
    } else {
      cpu::cpuKernel(iter, [v](T a, T b, T d) -> T { return T(M(a) + v * M(b) * M(d)); });
    }
  });
  return iter.output();
}

Tensor addcInplace(const char* name, bool divide, const Tensor& self, const Tensor& tensor1,
                   const Tensor& tensor2, const Scalar& value) {
  ScalarType result = cpu::pointwiseResultType({self, tensor1, tensor2}, PromotionKind::Default);
  return runInplace(name, self, result, {tensor1, tensor2}, [&](const Tensor& out) {
    return addcInto(name, divide, self, tensor1, tensor2, value, out);
  });
}

} // namespace

Tensor where(const Tensor& condition, const Tensor& self, const Tensor& other) {
  return whereInto(condition, self, other);
}

Tensor clamp(const Tensor& self, const std::optional<Scalar>& min,
             const std::optional<Scalar>& max) {
  return clampScalarInto("clamp", self, min, max, {});
}
Tensor clamp_(const Tensor& self, const std::optional<Scalar>& min,
              const std::optional<Scalar>& max) {
  return clampScalarInplace("clamp_", self, min, max);
}
Tensor clampTensor(const Tensor& self, const std::optional<Tensor>& min,
                   const std::optional<Tensor>& max) {
  return clampTensorInto("clamp", self, min, max, {});
}
Tensor clampTensor_(const Tensor& self, const std::optional<Tensor>& min,
                    const std::optional<Tensor>& max) {
  return clampTensorInplace("clamp_", self, min, max);
}
Tensor clampMin(const Tensor& self, const Scalar& min) {
  return clampScalarInto("clamp_min", self, min, std::nullopt, {});
}
Tensor clampMin_(const Tensor& self, const Scalar& min) {
  return clampScalarInplace("clamp_min_", self, min, std::nullopt);
}
Tensor clampMinTensor(const Tensor& self, const Tensor& min) {
  return clampTensorInto("clamp_min", self, min, std::nullopt, {});
}
Tensor clampMinTensor_(const Tensor& self, const Tensor& min) {
  return clampTensorInplace("clamp_min_", self, min, std::nullopt);
}
Tensor clampMax(const Tensor& self, const Scalar& max) {
  return clampScalarInto("clamp_max", self, std::nullopt, max, {});
}
Tensor clampMax_(const Tensor& self, const Scalar& max) {
  return clampScalarInplace("clamp_max_", self, std::nullopt, max);
}
Tensor clampMaxTensor(const Tensor& self, const Tensor& max) {
  return clampTensorInto("clamp_max", self, std::nullopt, max, {});
}
Tensor clampMaxTensor_(const Tensor& self, const Tensor& max) {
  return clampTensorInplace("clamp_max_", self, std::nullopt, max);
}

Tensor lerp(const Tensor& self, const Tensor& end, const Scalar& weight) {
  return lerpScalarInto("lerp", self, end, weight, {});
}
Tensor lerp_(const Tensor& self, const Tensor& end, const Scalar& weight) {
  checkLerpDtype(self, end, "end");
  return runInplace("lerp_", self, self.dtype(), {end}, [&](const Tensor& out) {
    return lerpScalarInto("lerp_", self, end, weight, out);
  });
}
Tensor lerpTensor(const Tensor& self, const Tensor& end, const Tensor& weight) {
  return lerpTensorInto("lerp", self, end, weight, {});
}
Tensor lerpTensor_(const Tensor& self, const Tensor& end, const Tensor& weight) {
  checkLerpDtype(self, end, "end");
  checkLerpDtype(self, weight, "weight");
  return runInplace("lerp_", self, self.dtype(), {end, weight}, [&](const Tensor& out) {
    return lerpTensorInto("lerp_", self, end, weight, out);
  });
}

Tensor addcmul(const Tensor& self, const Tensor& tensor1, const Tensor& tensor2,
               const Scalar& value) {
  return addcInto("addcmul", false, self, tensor1, tensor2, value, {});
}
Tensor addcmul_(const Tensor& self, const Tensor& tensor1, const Tensor& tensor2,
                const Scalar& value) {
  return addcInplace("addcmul_", false, self, tensor1, tensor2, value);
}
Tensor addcdiv(const Tensor& self, const Tensor& tensor1, const Tensor& tensor2,
               const Scalar& value) {
  return addcInto("addcdiv", true, self, tensor1, tensor2, value, {});
}
Tensor addcdiv_(const Tensor& self, const Tensor& tensor1, const Tensor& tensor2,
                const Scalar& value) {
  return addcInplace("addcdiv_", true, self, tensor1, tensor2, value);
}

} // namespace kiln::kernels
