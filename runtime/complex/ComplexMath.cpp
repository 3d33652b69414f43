// The Complex key's kernels for matrix products, transcendental functions, pow, where, gather,
// cumsum and prod, in real ops on the operands' (re, im) parts (docs/complex.md), so autograd and
// capture see real ops only. They are registered here by hand rather than named in the op table
// (`complex:` entries), which would regenerate every header: registerComplexMathKernels runs
// with the Complex fallback's registration.
#include <algorithm>
#include <cmath>

#include "generated/Ops.h"
#include "runtime/Dispatcher.h"
#include "runtime/Error.h"
#include "runtime/complex/ComplexFallback.h"
#include "runtime/complex/ComplexParts.h"

namespace kiln::complex {

namespace {

ScalarType realType(const char* op, const std::vector<Tensor>& operands) {
  return toRealValueType(complexResultType(op, operands));
}

Tensor orZero(const Tensor& part, const Tensor& like) {
  return part.defined() ? part : ops::zeros_like(like, std::nullopt, std::nullopt);
}

// (ar + i ai)(br + i bi) under a bilinear product (mm, bmm, matmul).
template <typename Product>
Tensor bilinear(const char* op, const Tensor& a, const Tensor& b, const Product& product) {
  ScalarType real = realType(op, {a, b});
  Parts x = partsOf(a, real), y = partsOf(b, real);
  Tensor re = product(x.re, y.re);
  if (x.im.defined() && y.im.defined()) re = ops::sub(re, product(x.im, y.im));
  Tensor im;
  if (x.im.defined()) im = product(x.im, y.re);
  if (y.im.defined()) im = im.defined() ? ops::add(im, product(x.re, y.im)) : product(x.re, y.im);
  return fromParts(re, im);
}

Tensor complexLog(const Tensor& z) {
  // log z = log |z| + i atan2(im, re)
  Parts p = partsOf(z, toRealValueType(z.dtype()));
  Tensor im = orZero(p.im, p.re);
  Tensor modulus = ops::linalg_vector_norm(ops::stack({p.re, im}, -1), Scalar(2.0), std::vector<int64_t>{-1}, false,
                                           std::nullopt);
  return fromParts(ops::log(modulus), ops::atan2(im, p.re));
}

Tensor complexSqrt(const Tensor& z) {
  // The principal root: re = sqrt((|z| + x) / 2), im = copysign(sqrt((|z| - x) / 2), y).
  Parts p = partsOf(z, toRealValueType(z.dtype()));
  Tensor im = orZero(p.im, p.re);
  Tensor modulus = ops::linalg_vector_norm(ops::stack({p.re, im}, -1), Scalar(2.0), std::vector<int64_t>{-1}, false,
                                           std::nullopt);
  Tensor re = ops::sqrt(ops::mul(ops::add(modulus, p.re, Scalar(int64_t(1))), Scalar(0.5)));
  Tensor imag = ops::sqrt(ops::mul(ops::sub(modulus, p.re, Scalar(int64_t(1))), Scalar(0.5)));
  // The sign of y, -0 included (1 / -0 = -inf).
  Tensor negative = ops::lt(ops::reciprocal(im), Scalar(0.0));
  return fromParts(re, ops::where(negative, ops::neg(imag), imag));
}

Tensor complexSin(const Tensor& z) {
  // sin(x + iy) = sin x cosh y + i cos x sinh y
  Parts p = partsOf(z, toRealValueType(z.dtype()));
  Tensor y = orZero(p.im, p.re);
  return fromParts(ops::mul(ops::sin(p.re), ops::cosh(y)), ops::mul(ops::cos(p.re), ops::sinh(y)));
}

Tensor complexCos(const Tensor& z) {
  // cos(x + iy) = cos x cosh y - i sin x sinh y
  Parts p = partsOf(z, toRealValueType(z.dtype()));
  Tensor y = orZero(p.im, p.re);
  return fromParts(ops::mul(ops::cos(p.re), ops::cosh(y)), ops::neg(ops::mul(ops::sin(p.re), ops::sinh(y))));
}

Tensor complexTanh(const Tensor& z) {
  // tanh(x + iy) = (tanh x (1 + tan^2 y) + i tan y (1 - tanh^2 x)) / (1 + tanh^2 x tan^2 y),
  // which stays finite for large |x| (Kahan's form, as libstdc++'s ctanh).
  Parts p = partsOf(z, toRealValueType(z.dtype()));
  Tensor y = orZero(p.im, p.re);
  Tensor t = ops::tanh(p.re), u = ops::tan(y);
  Tensor t2 = ops::mul(t, t), u2 = ops::mul(u, u);
  const Scalar one(1.0);
  Tensor denom = ops::add(ops::mul(t2, u2), one);
  Tensor re = ops::mul(t, ops::add(u2, one));
  Tensor im = ops::mul(u, ops::rsub(t2, one));
  return fromParts(ops::div(re, denom), ops::div(im, denom));
}

// z ** w = exp(w log z), as glibc's cpow that torch's CPU kernel calls: where the real part of
// w log z is -inf (0 ** w, Re w > 0) the result is 0 even when the imaginary part is nan
// (C99's cexp(-inf + i nan) = 0); 0 ** 0 is nan.
Tensor complexPow(const Tensor& z, const Tensor& w) {
  ScalarType complexType = complexResultType("pow", {z, w});
  ScalarType real = toRealValueType(complexType);
  Tensor base = ops::_to_copy(z, complexType, std::nullopt);
  Tensor exponent = isComplexType(w.dtype()) ? w : ops::_to_copy(w, complexType, std::nullopt);
  Parts q = partsOf(ops::mul(exponent, complexLog(base)), real);
  Tensor angle = orZero(q.im, q.re), scale = ops::exp(q.re);
  Tensor vanishing = ops::eq(q.re, Scalar(-INFINITY));
  Tensor zero = ops::zeros_like(scale, std::nullopt, std::nullopt);
  return fromParts(ops::where(vanishing, zero, ops::mul(scale, ops::cos(angle))),
                   ops::where(vanishing, zero, ops::mul(scale, ops::sin(angle))));
}

void boxedMm(Stack& s) {
  Tensor r = bilinear("mm", s[0].toTensor(), s[1].toTensor(),
                      [](const Tensor& a, const Tensor& b) { return ops::mm(a, b); });
  s.clear();
  s.emplace_back(std::move(r));
}
void boxedBmm(Stack& s) {
  Tensor r = bilinear("bmm", s[0].toTensor(), s[1].toTensor(),
                      [](const Tensor& a, const Tensor& b) { return ops::bmm(a, b); });
  s.clear();
  s.emplace_back(std::move(r));
}
void boxedMatmul(Stack& s) {
  Tensor r = bilinear("matmul", s[0].toTensor(), s[1].toTensor(),
                      [](const Tensor& a, const Tensor& b) { return ops::matmul(a, b); });
  s.clear();
  s.emplace_back(std::move(r));
}

template <Tensor (*Fn)(const Tensor&)> void boxedUnary(Stack& s) {
  Tensor r = Fn(s[0].toTensor());
  s.clear();
  s.emplace_back(std::move(r));
}

void boxedPowTensorTensor(Stack& s) {
  Tensor r = complexPow(s[0].toTensor(), s[1].toTensor());
  s.clear();
  s.emplace_back(std::move(r));
}
void boxedPowTensorScalar(Stack& s) {
  const Tensor& z = s[0].toTensor();
  Tensor r = complexPow(z, ops::full({}, s[1].toScalar(), toRealValueType(z.dtype()), z.device()));
  s.clear();
  s.emplace_back(std::move(r));
}
void boxedPowScalar(Stack& s) {
  const Tensor& w = s[1].toTensor();
  Tensor r = complexPow(ops::full({}, s[0].toScalar(), toRealValueType(w.dtype()), w.device()), w);
  s.clear();
  s.emplace_back(std::move(r));
}

void boxedWhere(Stack& s) {
  const Tensor &cond = s[0].toTensor(), &a = s[1].toTensor(), &b = s[2].toTensor();
  ScalarType real = realType("where", {a, b});
  Parts x = partsOf(a, real), y = partsOf(b, real);
  Tensor re = ops::where(cond, x.re, y.re);
  Tensor im = ops::where(cond, orZero(x.im, x.re), orZero(y.im, y.re));
  Tensor r = fromParts(re, im);
  s.clear();
  s.emplace_back(std::move(r));
}

void boxedGather(Stack& s) {
  const Tensor& self = s[0].toTensor();
  const int64_t dim = s[1].toInt();
  const Tensor& index = s[2].toTensor();
  Parts p = partsOf(self, toRealValueType(self.dtype()));
  Tensor r = fromParts(ops::gather(p.re, dim, index, false), ops::gather(p.im, dim, index, false));
  s.clear();
  s.emplace_back(std::move(r));
}

void boxedCumsum(Stack& s) {
  const Tensor& self = s[0].toTensor();
  const int64_t dim = s[1].toInt();
  ScalarType out = s[2].isNone() ? self.dtype() : s[2].toScalarType();
  KILN_CHECK(isComplexType(out), "cumsum: a complex input needs a complex dtype, got ", scalarTypeName(out));
  Tensor z = ops::_to_copy(self, out, std::nullopt);
  Parts p = partsOf(z, toRealValueType(out));
  Tensor r = fromParts(ops::cumsum(p.re, dim, std::nullopt), ops::cumsum(p.im, dim, std::nullopt));
  s.clear();
  s.emplace_back(std::move(r));
}

// The product of z over its last dim by pairwise halving (log2(n) complex multiplies of real
// parts; torch multiplies in order, which differs in rounding only). An empty dim gives 1.
Tensor productOverLastDim(const Tensor& z, ScalarType complexType) {
  Parts p = partsOf(ops::_to_copy(z, complexType, std::nullopt), toRealValueType(complexType));
  Tensor re = p.re, im = orZero(p.im, p.re);
  if (re.size(-1) == 0) {
    DimVector shape(re.sizes());
    shape[shape.size() - 1] = 1;
    return fromParts(ops::ones(shape, re.dtype(), re.device()), ops::zeros(shape, re.dtype(), re.device()));
  }
  while (re.size(-1) > 1) {
    if (re.size(-1) % 2) {
      DimVector shape(re.sizes());
      shape[shape.size() - 1] = 1;
      re = ops::cat({re, ops::ones(shape, re.dtype(), re.device())}, -1);
      im = ops::cat({im, ops::zeros(shape, im.dtype(), im.device())}, -1);
    }
    const int64_t half = re.size(-1) / 2;
    Tensor ar = ops::narrow(re, -1, 0, half), br = ops::narrow(re, -1, half, half);
    Tensor ai = ops::narrow(im, -1, 0, half), bi = ops::narrow(im, -1, half, half);
    re = ops::sub(ops::mul(ar, br), ops::mul(ai, bi));
    im = ops::add(ops::mul(ar, bi), ops::mul(ai, br));
  }
  return fromParts(re, im);
}

ScalarType productType(const Tensor& self, const Value& dtype) {
  ScalarType out = dtype.isNone() ? self.dtype() : dtype.toScalarType();
  KILN_CHECK(isComplexType(out), "prod: a complex input needs a complex dtype, got ", scalarTypeName(out));
  return out;
}

void boxedProd(Stack& s) {
  const Tensor& self = s[0].toTensor();
  Tensor r = ops::reshape(productOverLastDim(ops::reshape(self, {-1}), productType(self, s[1])), {});
  s.clear();
  s.emplace_back(std::move(r));
}

void boxedProdDim(Stack& s) {
  const Tensor& self = s[0].toTensor();
  const int64_t n = std::max<int64_t>(self.dim(), 1);
  const int64_t dim = s[1].toInt() < 0 ? s[1].toInt() + n : s[1].toInt();
  KILN_CHECK_INDEX(dim >= 0 && dim < n, "Dimension out of range (expected to be in range of [", -n, ", ", n - 1,
             "], but got ", s[1].toInt(), ")");
  const bool keepdim = s[2].toBool();
  Tensor moved = self.dim() == 0 ? ops::reshape(self, {1}) : ops::transpose(self, dim, -1);
  Tensor r = productOverLastDim(moved, productType(self, s[3]));  // the dim kept as size 1, last
  r = self.dim() == 0 ? ops::reshape(r, {}) : ops::transpose(r, dim, -1);
  if (!keepdim && self.dim() > 0) r = ops::squeeze(r, dim);
  s.clear();
  s.emplace_back(std::move(r));
}

} // namespace

void registerComplexMathKernels(Dispatcher& d) {
  const std::pair<const char*, BoxedKernel> kernels[] = {
      {"mm", boxedMm},
      {"bmm", boxedBmm},
      {"matmul", boxedMatmul},
      {"log", boxedUnary<complexLog>},
      {"sqrt", boxedUnary<complexSqrt>},
      {"sin", boxedUnary<complexSin>},
      {"cos", boxedUnary<complexCos>},
      {"tanh", boxedUnary<complexTanh>},
      {"pow.Tensor_Tensor", boxedPowTensorTensor},
      {"pow.Tensor_Scalar", boxedPowTensorScalar},
      {"pow.Scalar", boxedPowScalar},
      {"where.self", boxedWhere},
      {"gather", boxedGather},
      {"cumsum", boxedCumsum},
      {"prod", boxedProd},
      {"prod.dim_int", boxedProdDim},
  };
  for (const auto& [name, kernel] : kernels) {
    OpId op = d.find(name);
    KILN_CHECK(op != OpId::NumOps, "complex kernels: no op named ", name);
    d.registerKernel(op, DispatchKey::Complex, kernel);
  }
}

} // namespace kiln::complex
