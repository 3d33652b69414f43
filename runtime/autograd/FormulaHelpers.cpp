// Backward building blocks for the derivative formulas, written in ops (differentiable).
#include "runtime/autograd/FormulaHelpers.h"

#include <cstdint>
#include <cmath>
#include <numeric>

#include "generated/Ops.h"
#include "runtime/MaskIndex.h"
#include "runtime/autograd/ViewNodes.h"

namespace kiln::autograd {

bool isExpandableTo(IntArrayRef shape, IntArrayRef desired) {
  if (shape.size() > desired.size()) return false;
  for (size_t i = 0; i < shape.size(); ++i) {
    int64_t s = shape[shape.size() - 1 - i], d = desired[desired.size() - 1 - i];
    if (s != d && s != 1) return false;
  }
  return true;
}

Tensor sumTo(const Tensor& grad, IntArrayRef shape) {
  if (DimVector(grad.sizes()) == DimVector(shape)) return grad;
  int64_t lead = grad.dim() - int64_t(shape.size());
  std::vector<int64_t> dims;
  for (int64_t d = 0; d < lead; ++d) dims.push_back(d);
  for (size_t i = 0; i < shape.size(); ++i)
    if (shape[i] == 1 && grad.size(lead + int64_t(i)) != 1) dims.push_back(lead + int64_t(i));
  Tensor r = dims.empty() ? grad : ops::sum(grad, IntArrayRef(dims), true);
  if (lead > 0 || DimVector(r.sizes()) != DimVector(shape)) r = ops::reshape(r, shape);
  return r;
}

std::vector<int64_t> reducedDims(std::optional<IntArrayRef> dims, int64_t ndim) {
  std::vector<int64_t> out;
  if (!dims || dims->size() == 0) {
    out.resize(size_t(ndim));
    std::iota(out.begin(), out.end(), 0);
    return out;
  }
  for (int64_t d : *dims) out.push_back(wrapDim(d, ndim));
  std::sort(out.begin(), out.end());
  return out;
}

int64_t reducedNumel(IntArrayRef sizes, std::optional<IntArrayRef> dims) {
  int64_t n = 1;
  if (sizes.empty()) return n; // a 0-d tensor reduces over dim 0 / -1 to itself
  for (int64_t d : reducedDims(dims, int64_t(sizes.size()))) n *= sizes[size_t(d)];
  return n;
}

Tensor expandReduced(const Tensor& grad, IntArrayRef sizes, std::optional<IntArrayRef> dims, bool keepdim) {
  Tensor g = grad;
  int64_t ndim = int64_t(sizes.size());
  if (!keepdim && ndim > 0)
    for (int64_t d : reducedDims(dims, ndim)) g = ops::unsqueeze(g, d);
  return ops::expand(g, sizes);
}

Tensor sumBackward(const Tensor& grad, IntArrayRef sizes, std::optional<IntArrayRef> dims, bool keepdim) {
  return expandReduced(grad, sizes, dims, keepdim);
}

Tensor meanBackward(const Tensor& grad, IntArrayRef sizes, std::optional<IntArrayRef> dims, bool keepdim) {
  return ops::div(expandReduced(grad, sizes, dims, keepdim), Scalar(reducedNumel(sizes, dims)));
}

Tensor extremumBackward(const Tensor& grad, const Tensor& self, const Tensor& result,
                        std::optional<IntArrayRef> dims, bool keepdim) {
  Tensor r = expandReduced(result, self.sizes(), dims, keepdim);
  Tensor mask = ops::eq(self, r);
  Tensor count = expandReduced(ops::sum(mask, dims, keepdim, self.dtype()), self.sizes(), dims, keepdim);
  Tensor g = expandReduced(grad, self.sizes(), dims, keepdim);
  return ops::where(mask, ops::div(g, count), ops::zeros_like(g));
}

Tensor indexSelectingBackward(const Tensor& grad, int64_t dim, const Tensor& indices, IntArrayRef sizes,
                              bool keepdim) {
  Tensor g = grad, idx = indices;
  int64_t ndim = int64_t(sizes.size());
  if (ndim == 0) return grad;
  dim = wrapDim(dim, ndim);
  if (!keepdim) {
    g = ops::unsqueeze(g, dim);
    idx = ops::unsqueeze(idx, dim);
  }
  // One-hot along dim: where(position == index, grad, 0).
  DimVector posSizes(size_t(ndim), 1);
  posSizes[size_t(dim)] = sizes[size_t(dim)];
  Tensor positions = ops::reshape(ops::arange(Scalar(sizes[size_t(dim)]), ScalarType::Int64, grad.device()), posSizes);
  Tensor hit = ops::eq(positions, idx);
  return ops::where(hit, ops::expand(g, sizes), ops::zeros({}, grad.dtype(), grad.device()));
}

Tensor varBackward(const Tensor& grad, const Tensor& self, std::optional<IntArrayRef> dims,
                   double correction, bool keepdim) {
  int64_t n = reducedNumel(self.sizes(), dims);
  double scale = 2.0 / std::max<double>(double(n) - correction, 0.0);
  Tensor centered = ops::sub(self, ops::mean(self, dims, true));
  return ops::mul(ops::mul(expandReduced(grad, self.sizes(), dims, keepdim), centered), Scalar(scale));
}

Tensor stdBackward(const Tensor& grad, const Tensor& self, const Tensor& result,
                   std::optional<IntArrayRef> dims, double correction, bool keepdim) {
  Tensor g = ops::div(grad, ops::mul(result, Scalar(2.0)));
  g = ops::masked_fill(g, ops::eq(result, Scalar(0.0)), Scalar(0.0));
  return varBackward(g, self, dims, correction, keepdim);
}

// Products of all elements before each one along `dim` (exclusive cumulative product).
static Tensor exclusiveCumprod(const Tensor& x, int64_t dim) {
  int64_t n = x.size(dim);
  DimVector oneSizes(x.sizes());
  oneSizes[size_t(dim)] = 1;
  Tensor ones = ops::ones(oneSizes, x.dtype(), x.device());
  if (n <= 1) return ops::expand(ones, x.sizes());
  Tensor head = ops::cumprod(ops::narrow(x, dim, 0, n - 1), dim);
  return ops::cat({ones, head}, dim);
}

Tensor prodBackward(const Tensor& grad, const Tensor& self, const Tensor&, std::optional<int64_t> dim,
                    bool keepdim) {
  if (self.dim() == 0) return grad;
  if (!dim) {
    Tensor flat = ops::reshape(self, {-1});
    Tensor others = ops::mul(exclusiveCumprod(flat, 0), ops::flip(exclusiveCumprod(ops::flip(flat, {0}), 0), {0}));
    return ops::mul(ops::reshape(others, self.sizes()), grad);
  }
  int64_t d = wrapDim(*dim, self.dim());
  Tensor others = ops::mul(exclusiveCumprod(self, d), ops::flip(exclusiveCumprod(ops::flip(self, {d}), d), {d}));
  std::vector<int64_t> ds{d};
  return ops::mul(others, expandReduced(grad, self.sizes(), IntArrayRef(ds), keepdim));
}

Tensor logsumexpBackward(const Tensor& grad, const Tensor& self, const Tensor& result, IntArrayRef dims,
                         bool keepdim) {
  Tensor r = expandReduced(result, self.sizes(), dims, keepdim);
  return ops::mul(expandReduced(grad, self.sizes(), dims, keepdim), ops::exp(ops::sub(self, r)));
}

namespace {

bool is16BitFloat(const Tensor& t) {
  return t.dtype() == ScalarType::Float16 || t.dtype() == ScalarType::BFloat16;
}

Tensor widened(const Tensor& t) { return is16BitFloat(t) ? ops::_to_copy(t, ScalarType::Float32, std::nullopt) : t; }

// PyTorch computes these backward formulas as one kernel (gelu_backward, tanh_backward,
// _softmax_backward_data, ...) that widens 16-bit floats to float and rounds the result once;
// composed of kiln ops at the 16-bit type, each op would round (a bfloat16 GELU's gradient
// differed from PyTorch's in half its elements). `f` runs on the widened inputs.
template <typename F, typename... Ts> Tensor roundedOnce(const Tensor& grad, F&& f, const Ts&... ts) {
  if (!is16BitFloat(grad) && !(is16BitFloat(ts) || ...)) return f(grad, ts...);
  Tensor out = f(widened(grad), widened(ts)...);
  return ops::_to_copy(out, grad.dtype(), std::nullopt);
}

} // namespace

Tensor softmaxBackward(const Tensor& grad, const Tensor& result, int64_t dim, ScalarType dtype) {
  if (is16BitFloat(grad) || is16BitFloat(result))
    return roundedOnce(grad, [&](const Tensor& g, const Tensor& y) { return softmaxBackward(g, y, dim, dtype); },
                       result);
  std::vector<int64_t> d{dim};
  Tensor gy = ops::mul(grad, result);
  return ops::sub(gy, ops::mul(result, ops::sum(gy, IntArrayRef(d), true)));
}

Tensor logSoftmaxBackward(const Tensor& grad, const Tensor& result, int64_t dim, ScalarType dtype) {
  if (is16BitFloat(grad) || is16BitFloat(result))
    return roundedOnce(grad, [&](const Tensor& g, const Tensor& y) { return logSoftmaxBackward(g, y, dim, dtype); },
                       result);
  std::vector<int64_t> d{dim};
  return ops::sub(grad, ops::mul(ops::exp(result), ops::sum(grad, IntArrayRef(d), true)));
}

std::vector<Tensor> layerNormBackward(const Tensor& grad, const Tensor& input, IntArrayRef normalizedShape,
                                      const std::optional<Tensor>& weight, const std::optional<Tensor>& bias,
                                      double eps, const std::vector<bool>& mask) {
  int64_t axis = input.dim() - int64_t(normalizedShape.size());
  std::vector<int64_t> inner, outer;
  for (int64_t d = 0; d < input.dim(); ++d) (d >= axis ? inner : outer).push_back(d);
  Tensor mean = ops::mean(input, IntArrayRef(inner), true);
  Tensor rstd = ops::rsqrt(ops::add(ops::var(input, IntArrayRef(inner), false, true), Scalar(eps)));
  Tensor xhat = ops::mul(ops::sub(input, mean), rstd);
  std::vector<Tensor> out(3);
  if (mask[0]) {
    Tensor gx = weight ? ops::mul(grad, *weight) : grad;
    Tensor a = ops::mean(gx, IntArrayRef(inner), true);
    Tensor b = ops::mean(ops::mul(gx, xhat), IntArrayRef(inner), true);
    out[0] = ops::mul(rstd, ops::sub(ops::sub(gx, a), ops::mul(xhat, b)));
  }
  if (mask[1] && weight) {
    Tensor p = ops::mul(grad, xhat);
    out[1] = outer.empty() ? p : ops::sum(p, IntArrayRef(outer), false);
  }
  if (mask[2] && bias) out[2] = outer.empty() ? grad : ops::sum(grad, IntArrayRef(outer), false);
  return out;
}

Tensor selectBackward(const Tensor& grad, IntArrayRef sizes, int64_t dim, int64_t index) {
  Tensor z = ops::zeros(sizes, grad.dtype(), grad.device());
  ops::copy_(ops::select(z, dim, index), grad, false);
  return z;
}

Tensor sliceBackward(const Tensor& grad, IntArrayRef sizes, int64_t dim, std::optional<int64_t> start,
                     std::optional<int64_t> end, int64_t step) {
  Tensor z = ops::zeros(sizes, grad.dtype(), grad.device());
  ops::copy_(ops::slice(z, dim, start, end, step), grad, false);
  return z;
}

Tensor permuteBackward(const Tensor& grad, IntArrayRef dims) {
  std::vector<int64_t> inverse(dims.size());
  for (size_t i = 0; i < dims.size(); ++i) inverse[size_t(wrapDim(dims[i], int64_t(dims.size())))] = int64_t(i);
  return ops::permute(grad, inverse);
}

Tensor squeezeBackward(const Tensor& grad, IntArrayRef sizes) { return ops::reshape(grad, sizes); }

Tensor unbindBackward(const std::vector<Tensor>& grads, IntArrayRef sizes, ScalarType dtype, int64_t dim) {
  std::vector<int64_t> partSizes(sizes.begin(), sizes.end());
  partSizes.erase(partSizes.begin() + wrapDim(dim, int64_t(sizes.size())));
  std::vector<Tensor> parts;
  for (const Tensor& g : grads) parts.push_back(g.defined() ? g : ops::zeros(partSizes, dtype));
  return ops::stack(parts, dim);
}

std::vector<Tensor> catBackward(const Tensor& grad, const std::vector<Tensor>& tensors, int64_t dim) {
  std::vector<Tensor> out;
  int64_t offset = 0;
  int64_t ndim = grad.dim();
  for (const Tensor& t : tensors) {
    if (t.dim() == 1 && t.size(0) == 0 && ndim != 1) { // legacy empty inputs take no part
      out.push_back(ops::zeros({0}, grad.dtype(), grad.device()));
      continue;
    }
    int64_t d = wrapDim(dim, ndim);
    int64_t n = t.size(d);
    out.push_back(ops::narrow(grad, d, offset, n));
    offset += n;
  }
  return out;
}

Tensor matmulBackwardSelf(const Tensor& grad, const Tensor& self, const Tensor& other) {
  if (self.dim() == 1 && other.dim() == 1) return ops::mul(grad, other);
  Tensor o = other.dim() == 1 ? ops::unsqueeze(other, 0) : ops::transpose(other, -1, -2);
  Tensor g = grad;
  if (other.dim() == 1) g = ops::unsqueeze(g, -1);
  if (self.dim() == 1) g = ops::unsqueeze(g, -2);
  Tensor r = ops::matmul(g, o);
  if (self.dim() == 1) return ops::reshape(sumTo(r, {1, self.size(0)}), self.sizes());
  return sumTo(r, self.sizes());
}

Tensor matmulBackwardOther(const Tensor& grad, const Tensor& self, const Tensor& other) {
  if (self.dim() == 1 && other.dim() == 1) return ops::mul(grad, self);
  if (self.dim() >= 3 && other.dim() <= 2) {
    // The forward folded self's batch dims into the rows of one mm (matmul's own rule, as
    // torch.matmul's): so does the gradient, one product over every row, rather than a
    // batched product per batch entry summed afterwards (a linear layer without bias on
    // [batch, seq, features]: a bmm and a reduction before).
    int64_t k = self.size(-1), n = 1; // the row count spelled out: -1 is ambiguous when k is 0
    for (int64_t d = 0; d + 1 < self.dim(); ++d) n *= self.size(d);
    Tensor rows = ops::reshape(self, {n, k});
    if (other.dim() == 1) return ops::mv(ops::t(rows), ops::reshape(grad, {n}));
    return ops::mm(ops::t(rows), ops::reshape(grad, {n, other.size(1)}));
  }
  Tensor s = self.dim() == 1 ? ops::unsqueeze(self, -1) : ops::transpose(self, -1, -2);
  Tensor g = grad;
  if (other.dim() == 1) g = ops::unsqueeze(g, -1);
  if (self.dim() == 1) g = ops::unsqueeze(g, -2);
  Tensor r = ops::matmul(s, g);
  if (other.dim() == 1) return ops::reshape(sumTo(r, {other.size(0), 1}), other.sizes());
  return sumTo(r, other.sizes());
}

Tensor powBackwardSelf(const Tensor& grad, const Tensor& self, const Tensor& exponent) {
  // `x ** 2` binds the number to the Tensor exponent as a wrapped number: as PyTorch's
  // pow.Tensor_Scalar, exponent - 1 is number arithmetic (a traced sub would get a Python
  // number as its self).
  if (exponent.isWrappedNumber() && !exponent.isMeta()) return powScalarBackward(grad, self, exponent.item());
  Tensor g = ops::mul(ops::mul(grad, exponent), ops::pow(self, ops::sub(exponent, Scalar(1))));
  return ops::masked_fill(g, ops::eq(exponent, Scalar(0.0)), Scalar(0.0));
}

Tensor powBackwardExponent(const Tensor& grad, const Tensor& self, const Tensor& exponent, const Tensor& result) {
  // d/de self^e = self^e * log(self), taken as 0 where self == 0 and e >= 0 (PyTorch's choice).
  Tensor g = ops::mul(grad, ops::mul(result, ops::log(self)));
  return ops::masked_fill(g, ops::logical_and(ops::eq(self, Scalar(0.0)), ops::ge(exponent, Scalar(0.0))),
                          Scalar(0.0));
}

Tensor powScalarBackward(const Tensor& grad, const Tensor& self, const Scalar& exponent) {
  double e = exponent.toDouble();
  if (e == 0.0) return ops::zeros_like(grad);
  return ops::mul(ops::mul(grad, exponent), ops::pow(self, Scalar(e - 1.0)));
}

Tensor powScalarBaseBackward(const Tensor& grad, const Scalar& self, const Tensor& exponent, const Tensor& result) {
  Tensor g = ops::mul(grad, ops::mul(result, Scalar(std::log(self.toDouble()))));
  if (self.toDouble() != 0.0) return g;
  return ops::masked_fill(g, ops::ge(exponent, Scalar(0.0)), Scalar(0.0));
}

Tensor clampBackward(const Tensor& grad, const Tensor& self, const std::optional<Scalar>& min,
                     const std::optional<Scalar>& max) {
  Tensor keep;
  if (min) keep = ops::ge(self, *min);
  if (max) keep = keep.defined() ? ops::logical_and(keep, ops::le(self, *max)) : ops::le(self, *max);
  if (!keep.defined()) return grad;
  return ops::where(keep, grad, ops::zeros_like(grad));
}

Tensor clampTensorBackward(const Tensor& grad, const Tensor& self, const std::optional<Tensor>& min,
                           const std::optional<Tensor>& max) {
  Tensor keep;
  if (min) keep = ops::ge(self, *min);
  if (max) keep = keep.defined() ? ops::logical_and(keep, ops::le(self, *max)) : ops::le(self, *max);
  if (!keep.defined()) return grad;
  return ops::where(keep, grad, ops::zeros_like(grad));
}

std::vector<Tensor> clampBackwardMinMax(const Tensor& grad, const Tensor& self, const std::optional<Tensor>& min,
                                        const std::optional<Tensor>& max, const std::vector<bool>& mask) {
  std::vector<Tensor> out(2);
  Tensor zero = ops::zeros({}, grad.dtype(), grad.device());
  if (min && max) {
    if (mask[0]) out[0] = ops::where(ops::logical_and(ops::lt(self, *min), ops::lt(*min, *max)), grad, zero);
    if (mask[1]) out[1] = ops::where(ops::logical_or(ops::gt(self, *max), ops::lt(*max, *min)), grad, zero);
  } else if (min) {
    if (mask[0]) out[0] = ops::where(ops::lt(self, *min), grad, zero);
  } else if (max) {
    if (mask[1]) out[1] = ops::where(ops::gt(self, *max), grad, zero);
  }
  return out;
}

Tensor tanhBackward(const Tensor& grad, const Tensor& result) {
  return roundedOnce(grad, [](const Tensor& g, const Tensor& y) {
    return ops::mul(g, ops::sub(Scalar(1.0), ops::mul(y, y)));
  }, result);
}

Tensor sigmoidBackward(const Tensor& grad, const Tensor& result) {
  return roundedOnce(grad, [](const Tensor& g, const Tensor& y) {
    return ops::mul(g, ops::mul(y, ops::sub(Scalar(1.0), y)));
  }, result);
}

Tensor geluBackward(const Tensor& grad, const Tensor& self, const std::string& approximate) {
  if (is16BitFloat(grad) || is16BitFloat(self))
    return roundedOnce(grad, [&](const Tensor& g, const Tensor& x) { return geluBackward(g, x, approximate); }, self);
  if (approximate == "tanh") {
    const double k = std::sqrt(2.0 / M_PI), c = 0.044715;
    Tensor x2 = ops::mul(self, self);
    Tensor inner = ops::mul(ops::mul(self, ops::add(ops::mul(x2, Scalar(c)), Scalar(1.0))), Scalar(k));
    Tensor t = ops::tanh(inner);
    Tensor dinner = ops::mul(ops::add(ops::mul(x2, Scalar(3.0 * c)), Scalar(1.0)), Scalar(k));
    Tensor left = ops::mul(ops::add(t, Scalar(1.0)), Scalar(0.5));
    Tensor right = ops::mul(ops::mul(ops::mul(self, Scalar(0.5)), ops::sub(Scalar(1.0), ops::mul(t, t))), dinner);
    return ops::mul(grad, ops::add(left, right));
  }
  Tensor cdf = ops::mul(ops::add(ops::erf(ops::mul(self, Scalar(M_SQRT1_2))), Scalar(1.0)), Scalar(0.5));
  Tensor pdf = ops::mul(ops::exp(ops::mul(ops::mul(self, self), Scalar(-0.5))), Scalar(0.5 * M_2_SQRTPI * M_SQRT1_2));
  return ops::mul(grad, ops::add(cdf, ops::mul(self, pdf)));
}

Tensor siluBackward(const Tensor& grad, const Tensor& self) {
  if (is16BitFloat(grad) || is16BitFloat(self)) return roundedOnce(grad, siluBackward, self);
  Tensor sig = ops::sigmoid(self);
  return ops::mul(grad, ops::mul(sig, ops::add(ops::mul(self, ops::sub(Scalar(1.0), sig)), Scalar(1.0))));
}

Tensor minmaxGrad(const Tensor& grad, const Tensor& self, const Tensor& other, bool isMax, bool forSelf) {
  Tensor halved = ops::where(ops::eq(self, other), ops::div(grad, Scalar(2.0)), grad);
  Tensor loses = (isMax == forSelf) ? ops::lt(self, other) : ops::gt(self, other);
  return ops::masked_fill(halved, loses, Scalar(0.0));
}

Tensor roundingGrad(const Tensor& grad, const std::optional<std::string>& mode, const Tensor& other) {
  return mode ? ops::zeros_like(grad) : ops::div(grad, other);
}

Tensor roundingGradOther(const Tensor& grad, const std::optional<std::string>& mode, const Tensor& self,
                         const Tensor& other) {
  if (mode) return ops::zeros_like(grad);
  return ops::neg(ops::div(ops::mul(grad, self), ops::mul(other, other)));
}

Tensor normBackward(const Tensor& grad, const Tensor& self, const Scalar& ord, const Tensor& result,
                    std::optional<IntArrayRef> dims, bool keepdim) {
  double p = ord.toDouble();
  Tensor g = expandReduced(grad, self.sizes(), dims, keepdim);
  Tensor n = expandReduced(result, self.sizes(), dims, keepdim);
  if (p == 0.0) return ops::zeros_like(self);
  if (p == 1.0) return ops::mul(ops::sign(self), g);
  if (std::isinf(p)) {
    Tensor hit = ops::eq(ops::abs(self), n);
    Tensor count = expandReduced(ops::sum(hit, dims, keepdim, self.dtype()), self.sizes(), dims, keepdim);
    return ops::where(hit, ops::div(ops::mul(ops::sign(self), g), count), ops::zeros_like(g));
  }
  Tensor r;
  if (p == 2.0) r = ops::div(ops::mul(self, g), n);
  else {
    Tensor scaled = ops::mul(ops::sign(self), ops::pow(ops::abs(self), Scalar(p - 1.0)));
    // p < 1: |x|^(p-1) is infinite at 0, where PyTorch takes the gradient as 0.
    if (p < 1.0) scaled = ops::masked_fill(scaled, ops::eq(self, Scalar(0.0)), Scalar(0.0));
    r = ops::div(ops::mul(scaled, g), ops::pow(n, Scalar(p - 1.0)));
  }
  return ops::masked_fill(r, ops::eq(n, Scalar(0.0)), Scalar(0.0));
}

Tensor asStridedBackward(const Tensor& grad, const Tensor& self, IntArrayRef size, IntArrayRef stride,
                         std::optional<int64_t> storageOffset) {
  Geometry view{DimVector(size), DimVector(stride), storageOffset ? *storageOffset : self.storageOffset()};
  return asStridedGrad(grad, Geometry::of(self), view);
}

Tensor repeatBackward(const Tensor& grad, IntArrayRef sizes, IntArrayRef repeats) {
  size_t lead = repeats.size() - sizes.size();
  std::vector<int64_t> split, sumDims;
  for (size_t i = 0; i < repeats.size(); ++i) {
    int64_t s = i < lead ? 1 : sizes[i - lead];
    sumDims.push_back(int64_t(split.size()));
    split.push_back(repeats[i]);
    split.push_back(s);
  }
  return ops::reshape(ops::sum(ops::reshape(grad, split), IntArrayRef(sumDims), false), sizes);
}

Tensor rollBackward(const Tensor& grad, IntArrayRef shifts, IntArrayRef dims) {
  std::vector<int64_t> back;
  for (int64_t s : shifts) back.push_back(-s);
  return ops::roll(grad, back, dims);
}

// Index tensors that address every element of `grad` with `index` in place of dim `dim`.
static std::vector<std::optional<Tensor>> fullIndices(const Tensor& grad, int64_t dim, const Tensor& index) {
  std::vector<std::optional<Tensor>> idx;
  int64_t ndim = grad.dim();
  for (int64_t d = 0; d < ndim; ++d) {
    if (d == dim) {
      idx.emplace_back(index);
      continue;
    }
    DimVector shape(size_t(ndim), 1);
    shape[size_t(d)] = grad.size(d);
    idx.emplace_back(ops::reshape(ops::arange(Scalar(grad.size(d)), ScalarType::Int64, grad.device()), shape));
  }
  return idx;
}

Tensor indexPutValuesBackward(const Tensor& grad, const std::vector<std::optional<Tensor>>& indices,
                              const Tensor& values) {
  std::optional<MaskIndex> m = singleMaskIndex(indices);
  if (!m) return sumTo(ops::index(grad, indices), values.sizes());
  // grad has self's shape; the indexed shape is self[:first] + [k] + self[first + mask dims:],
  // k the mask's true count, and values broadcast to it right-aligned.
  const int64_t first = m->first, maskDims = m->mask.dim();
  const int64_t after = grad.dim() - first - maskDims, rank = first + 1 + after;
  KILN_CHECK(values.dim() <= rank, "index_put: values of shape ", values.shapeString(),
             " for an indexed shape of rank ", rank);
  DimVector outer; // self's dims around the mask, with one dim in its place
  for (int64_t d = 0; d < first; ++d) outer.push_back(grad.size(d));
  outer.push_back(1);
  for (int64_t d = first + maskDims; d < grad.dim(); ++d) outer.push_back(grad.size(d));
  const int64_t valuesAtMask = values.dim() - rank + first; // values' dim facing k (< 0: none)
  Tensor g;
  if (valuesAtMask < 0 || values.size(valuesAtMask) == 1) {
    // One value element went to every selected element: their gradients add up.
    DimVector shape(size_t(first), 1);
    for (int64_t s : m->mask.sizes()) shape.push_back(s);
    shape.resize(size_t(grad.dim()), 1);
    Tensor picked = ops::where(ops::reshape(m->mask, shape), grad, ops::zeros({}, grad.dtype(), grad.device()));
    std::vector<int64_t> maskAxes;
    for (int64_t d = first; d < first + maskDims; ++d) maskAxes.push_back(d);
    g = ops::reshape(ops::sum(picked, IntArrayRef(maskAxes), false), outer);
  } else {
    // The j-th selected element (in row-major order) came from values' j-th slot: a cumulative
    // count of the mask numbers the slots; unselected elements go to a spare slot dropped after.
    const int64_t slots = values.size(valuesAtMask);
    Tensor flatMask = ops::reshape(m->mask, {-1});
    Tensor slot = ops::where(flatMask, ops::sub(ops::cumsum(flatMask, 0, ScalarType::Int64), Scalar(int64_t(1))),
                             ops::scalar_tensor(Scalar(slots), ScalarType::Int64, grad.device()));
    DimVector flat = outer, spare = outer;
    flat[size_t(first)] = flatMask.numel();
    spare[size_t(first)] = slots + 1;
    Tensor acc = ops::index_add(ops::zeros(spare, grad.dtype(), grad.device()), first, slot,
                                ops::reshape(grad, flat));
    g = ops::narrow(acc, first, 0, slots);
  }
  return sumTo(g, values.sizes());
}

Tensor indexSelectBackward(const Tensor& grad, IntArrayRef sizes, int64_t dim, const Tensor& index) {
  Tensor z = ops::zeros(sizes, grad.dtype(), grad.device());
  if (sizes.empty()) return ops::add(z, ops::sum(grad));
  int64_t d = wrapDim(dim, int64_t(sizes.size()));
  DimVector shape(size_t(grad.dim()), 1);
  shape[size_t(d)] = index.numel();
  return ops::index_put(z, fullIndices(grad, d, ops::reshape(index, shape)), grad, true);
}

Tensor gatherBackward(const Tensor& grad, IntArrayRef sizes, int64_t dim, const Tensor& index) {
  Tensor z = ops::zeros(sizes, grad.dtype(), grad.device());
  if (sizes.empty()) return ops::add(z, ops::sum(grad));
  return ops::index_put(z, fullIndices(grad, wrapDim(dim, int64_t(sizes.size())), index), grad, true);
}

Tensor zerosLikeGrad(const Tensor& grad, IntArrayRef sizes) {
  return ops::zeros(sizes, grad.dtype(), grad.device());
}

Tensor scaleBy(const Tensor& grad, const Scalar& x) {
  if (!x.isBool() && x.toDouble() == 1.0) return grad;
  return ops::mul(grad, x);
}

} // namespace kiln::autograd
