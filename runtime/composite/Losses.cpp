// Loss functions written in other ops (ir/ops/loss.yaml), with PyTorch's formulas, argument
// checks and error messages. `reduction` is PyTorch's enum: 0 none, 1 mean, 2 sum.
#include <cstdint>
#include <vector>

#include "generated/KernelDecls.h"
#include "generated/Ops.h"
#include "runtime/Error.h"

namespace kiln::kernels {

namespace {

enum Reduction : int64_t { kNone = 0, kMean = 1, kSum = 2 };

Tensor reduce(const Tensor& loss, int64_t reduction) {
  switch (reduction) {
  case kNone: return loss;
  case kMean: return ops::mean(loss);
  case kSum: return ops::sum(loss);
  }
  throw ValueError(strCat(reduction, " is not a valid value for reduction"));
}

void checkFloating(const Tensor& self, const char* kernelName) {
  if (!isFloatingType(self.dtype())) throwUnsupportedDtype(kernelName, self.dtype());
}

// Class-index targets hold values in [0, C) or ignore_index. The check reads the data, as
// PyTorch's kernel does; meta tensors (shape propagation) have none to read.
void checkTargetsInRange(const Tensor& target, int64_t numClasses, int64_t ignoreIndex) {
  if (!target.device().isCpu()) return;
  Tensor t = ops::contiguous(ops::to(target, ScalarType::Int64));
  const int64_t* data = t.data<int64_t>();
  for (int64_t i = 0; i < t.numel(); ++i) {
    int64_t c = data[i];
    if (c != ignoreIndex && (c < 0 || c >= numClasses))
      throw IndexError(strCat("Target ", c, " is out of bounds."));
  }
}

// The weight of each class, shaped to broadcast against an (N, C, d1, ...) input.
Tensor classWeightView(const Tensor& weight, int64_t ndim, int64_t classDim) {
  std::vector<int64_t> shape(size_t(ndim), 1);
  shape[size_t(classDim)] = weight.numel();
  return ops::view(weight, shape);
}

} // namespace

Tensor mseLoss(const Tensor& self, const Tensor& target, int64_t reduction) {
  checkFloating(self, "mse_cpu");
  return reduce(ops::square(ops::sub(self, target)), reduction);
}

Tensor l1Loss(const Tensor& self, const Tensor& target, int64_t reduction) {
  return reduce(ops::abs(ops::sub(self, target)), reduction);
}

Tensor smoothL1Loss(const Tensor& self, const Tensor& target, int64_t reduction, double beta) {
  KILN_CHECK(beta >= 0, "smooth_l1_loss does not support negative values for beta.");
  checkFloating(self, "smooth_l1_cpu");
  Tensor z = ops::abs(ops::sub(self, target));
  if (beta == 0.0) return reduce(z, reduction);
  Tensor quadratic = ops::div(ops::mul(ops::square(z), 0.5), beta);
  return reduce(ops::where(ops::lt(z, beta), quadratic, ops::sub(z, 0.5 * beta)), reduction);
}

namespace {

// PyTorch's nll_loss_nd: input (C), (N, C) or (N, C, d1, ...); target (), (N) or (N, d1, ...).
Tensor nllLossNd(const Tensor& self, const Tensor& target, const std::optional<Tensor>& weight,
                 int64_t reduction, int64_t ignore_index) {
  KILN_CHECK_VALUE(self.dim() >= 1, "Expected 1 or more dimensions (got ", self.dim(), ")");
  checkFloating(self, "nll_loss_out_frame");
  if (self.dim() == 1) {
    // One sample without a batch dim: a 0-d target.
    KILN_CHECK(target.dim() <= 1, "0D or 1D target tensor expected, multi-target not supported");
    KILN_CHECK(target.dim() == 0, "size mismatch (got input: ", self.shapeString(), ", target: ",
               target.shapeString(), ")");
    Tensor loss = nllLossNd(ops::unsqueeze(self, 0), ops::unsqueeze(target, 0), weight, reduction, ignore_index);
    return reduction == kNone ? ops::squeeze(loss, 0) : loss;
  }
  int64_t targetBatch = target.dim() ? target.size(0) : 1;
  KILN_CHECK_VALUE(self.size(0) == targetBatch, "Expected input batch_size (", self.size(0),
                   ") to match target batch_size (", targetBatch, ").");
  if (self.dim() == 2) {
    KILN_CHECK(target.dim() == 1, "0D or 1D target tensor expected, multi-target not supported");
  } else {
    std::vector<int64_t> expected{self.size(0)};
    for (int64_t d = 2; d < self.dim(); ++d) expected.push_back(self.size(d));
    KILN_CHECK(target.sizes() == IntArrayRef(expected), "Expected target size ", shapeString(expected),
               ", got ", target.shapeString());
  }
  // The target's dtype after its shape, as PyTorch (nll_loss_nd checks the batch size and the
  // kernel the dtype): a float target of another batch size is a ValueError there.
  KILN_CHECK(target.dtype() == ScalarType::Int64 || target.dtype() == ScalarType::UInt8,
             "expected target dtype to be Long or Byte, but got ", scalarTypeShortName(target.dtype()));
  int64_t numClasses = self.size(1);
  if (weight)
    KILN_CHECK(weight->numel() == numClasses, "weight tensor should be defined either for all ", numClasses,
               " classes or no classes but got weight tensor of shape: ", weight->shapeString());
  checkTargetsInRange(target, numClasses, ignore_index);

  Tensor ignored = ops::eq(target, ignore_index);
  Tensor safeTarget = ops::masked_fill(ops::to(target, ScalarType::Int64), ignored, 0);
  Tensor picked = ops::squeeze(ops::gather(self, 1, ops::unsqueeze(safeTarget, 1)), 1);
  Tensor targetWeight;
  if (weight) {
    targetWeight = ops::view(ops::index_select(*weight, 0, ops::flatten(safeTarget)), safeTarget.sizes());
    targetWeight = ops::masked_fill(targetWeight, ignored, 0);
  } else {
    targetWeight = ops::to(ops::logical_not(ignored), self.dtype());
  }
  Tensor loss = ops::neg(ops::mul(picked, targetWeight));
  if (reduction == kMean) return ops::div(ops::sum(loss), ops::sum(targetWeight));
  return reduce(loss, reduction);
}

} // namespace

// aten.nll_loss takes (C) or (N, C) inputs; nn.functional.nll_loss flattens the others.
Tensor nllLoss(const Tensor& self, const Tensor& target, const std::optional<Tensor>& weight, int64_t reduction,
               int64_t ignore_index) {
  KILN_CHECK(self.dim() >= 1 && self.dim() <= 2, "input tensor should be 1D or 2D");
  return nllLossNd(self, target, weight, reduction, ignore_index);
}

Tensor crossEntropyLoss(const Tensor& self, const Tensor& target, const std::optional<Tensor>& weight,
                        int64_t reduction, int64_t ignore_index, double label_smoothing) {
  KILN_CHECK(label_smoothing >= 0.0 && label_smoothing <= 1.0,
             "label_smoothing must be between 0.0 and 1.0. Got: ", label_smoothing);
  int64_t classDim = self.dim() == 1 ? 0 : 1;
  int64_t numClasses = self.dim() ? self.size(classDim) : 0;
  bool probabilities = self.sizes() == target.sizes();
  if (probabilities)
    KILN_CHECK(isFloatingType(target.dtype()), "Expected floating point type for target with class probabilities, got ",
               scalarTypeShortName(target.dtype()));
  checkFloating(self, "log_softmax_lastdim_kernel_impl");
  Tensor logProbs = ops::log_softmax(self, classDim);

  if (probabilities) {
    Tensor probs = target;
    if (label_smoothing > 0.0)
      probs = ops::add(ops::mul(target, 1.0 - label_smoothing), label_smoothing / double(numClasses));
    Tensor terms = ops::mul(logProbs, probs);
    if (weight) terms = ops::mul(terms, classWeightView(*weight, self.dim(), classDim));
    switch (reduction) {
    case kNone: return ops::neg(ops::sum(terms, IntArrayRef{classDim}));
    case kSum: return ops::neg(ops::sum(terms));
    case kMean: return ops::div(ops::neg(ops::sum(terms)), double(self.numel() / std::max<int64_t>(numClasses, 1)));
    }
    return reduce(terms, reduction); // raises for an invalid reduction
  }

  Tensor nll = nllLossNd(logProbs, target, weight, reduction, ignore_index);
  if (label_smoothing <= 0.0) return nll;
  // Smoothing: the loss against the uniform distribution, ignored targets masked out.
  Tensor weighted = weight ? ops::mul(logProbs, classWeightView(*weight, self.dim(), classDim)) : logProbs;
  Tensor ignored = ops::eq(target, ignore_index);
  Tensor smooth = ops::masked_fill(ops::neg(ops::sum(weighted, IntArrayRef{classDim})), ignored, 0);
  Tensor smoothReduced;
  if (reduction == kMean) {
    Tensor denominator;
    if (weight) {
      Tensor safeTarget = ops::masked_fill(ops::to(target, ScalarType::Int64), ignored, 0);
      Tensor targetWeight = ops::view(ops::index_select(*weight, 0, ops::flatten(safeTarget)), safeTarget.sizes());
      denominator = ops::sum(ops::masked_fill(targetWeight, ignored, 0));
    } else {
      denominator = ops::sum(ops::logical_not(ignored));
    }
    smoothReduced = ops::div(ops::sum(smooth), denominator);
  } else {
    smoothReduced = reduce(smooth, reduction);
  }
  return ops::add(ops::mul(nll, 1.0 - label_smoothing), ops::mul(smoothReduced, label_smoothing / double(numClasses)));
}

Tensor binaryCrossEntropy(const Tensor& self, const Tensor& target, const std::optional<Tensor>& weight,
                          int64_t reduction) {
  KILN_CHECK(self.dtype() == target.dtype(), "Found dtype ", scalarTypeShortName(target.dtype()),
             " but expected ", scalarTypeShortName(self.dtype()));
  checkFloating(self, "binary_cross_entropy");
  if (self.device().isCpu()) {
    Tensor outside = ops::logical_or(ops::lt(self, 0), ops::gt(self, 1));
    KILN_CHECK(!ops::any(outside).item().toBool(), "all elements of input should be between 0 and 1");
  }
  // PyTorch clamps each log at -100 so that 0 and 1 give a finite loss.
  Tensor logP = ops::clamp_min(ops::log(self), -100);
  Tensor logQ = ops::clamp_min(ops::log(ops::rsub(self, 1)), -100);
  Tensor loss = ops::neg(ops::add(ops::mul(target, logP), ops::mul(ops::rsub(target, 1), logQ)));
  if (weight) loss = ops::mul(loss, *weight);
  return reduce(loss, reduction);
}

Tensor binaryCrossEntropyWithLogits(const Tensor& self, const Tensor& target, const std::optional<Tensor>& weight,
                                    const std::optional<Tensor>& pos_weight, int64_t reduction) {
  checkFloating(self, "log_sigmoid_cpu");
  // log(sigmoid(x)): x - log1p(exp(x)) below 0, -log1p(exp(-x)) from 0 up, each branch on its clamped
  // side of x (stable for large |x|). min(x, 0) - log1p(exp(-|x|)) had the gradient 1 instead of 1/2
  // at x = 0: the gradient sigmoid(0) - y came out 1/2 too low (a zero-initialized head's first step).
  Tensor low = ops::clamp_max(self, 0), high = ops::clamp_min(self, 0);
  Tensor logSigmoid = ops::where(ops::lt(self, 0), ops::sub(low, ops::log1p(ops::exp(low))),
                                 ops::neg(ops::log1p(ops::exp(ops::neg(high)))));
  if (pos_weight) logSigmoid = ops::mul(logSigmoid, ops::add(ops::mul(ops::sub(*pos_weight, 1), target), 1));
  Tensor loss = ops::sub(ops::mul(ops::rsub(target, 1), self), logSigmoid);
  if (weight) loss = ops::mul(loss, *weight);
  return reduce(loss, reduction);
}

} // namespace kiln::kernels
