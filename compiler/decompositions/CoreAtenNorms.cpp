// Normalizations in core ATen ops, following torch/_decomp/decompositions.py (native_layer_norm,
// native_batch_norm_helper).
#include <cstdint>
#include <cmath>

#include "compiler/decompositions/CoreAtenSupport.h"
#include "runtime/Error.h"
#include "runtime/ViewGeometry.h"
#include "generated/DecompositionDecls.h"

namespace kiln::decompositions {

// Biased variance and mean over the normalized (last) dims in the computation dtype, then
// (x - mean) * rsqrt(var + eps), weight and bias applied before casting back.
Tensor layerNorm(const Tensor& input, IntArrayRef normalizedShape,
                 const std::optional<Tensor>& weight, const std::optional<Tensor>& bias,
                 double eps) {
  std::vector<int64_t> dims;
  for (int64_t d = input.dim() - int64_t(normalizedShape.size()); d < input.dim(); ++d)
    dims.push_back(d);
  // The eager kernel (as PyTorch's) normalizes a contiguous copy and returns a contiguous
  // result; pointwise ops on a transposed input would keep its strides, and a view of the
  // result that the captured graph made (MLP-Mixer: layer_norm of a transposed sum, then a
  // Linear's view) would not fit them.
  Tensor x = convert(input.isContiguous() ? input : ops::clone(input), computationDtype(input.dtype()));
  Tensor var = ops::varCorrection(x, IntArrayRef(dims), Scalar(int64_t(0)), true);
  Tensor mean = ops::mean(x, IntArrayRef(dims), true);
  Tensor out = ops::mul(ops::sub(x, mean), ops::rsqrt(ops::add(var, Scalar(eps))));
  if (weight) out = ops::mul(out, *weight);
  if (bias) out = ops::add(out, *bias);
  return convert(out, input.dtype());
}

// Batch norm over dims 0, 2, 3, ... per channel (dim 1), in the computation dtype. Training:
// biased batch statistics normalize, save_mean/save_invstd are per channel, and the running
// statistics are updated in place (copy_; running_var with the unbiased variance), as the eager
// kernel does. Evaluation: the running statistics normalize and save_mean/save_invstd are empty.
// The statistics have the parameters' dtype (the input's when none is given), as eagerly.
std::tuple<Tensor, Tensor, Tensor>
nativeBatchNorm(const Tensor& input, const std::optional<Tensor>& weight,
                const std::optional<Tensor>& bias, const std::optional<Tensor>& runningMean,
                const std::optional<Tensor>& runningVar, bool training, double momentum,
                double eps) {
  KILN_CHECK(input.dim() >= 2, "native_batch_norm: expected an input of at least 2 dims (N, C, ...), ",
             "but got ", input.shapeString());
  KILN_CHECK(training || (runningMean && runningVar),
             "native_batch_norm: running_mean and running_var must be given in evaluation mode ",
             "(training=False)");
  const int64_t c = input.sizes()[1];
  std::vector<int64_t> dims{0}, shape(size_t(input.dim()), 1);
  for (int64_t d = 2; d < input.dim(); ++d) dims.push_back(d);
  shape[1] = c;
  ScalarType statType = input.dtype();
  for (const std::optional<Tensor>* p : {&weight, &bias, &runningMean, &runningVar})
    if (*p) {
      statType = (*p)->dtype();
      break;
    }
  const ScalarType ct = computationDtype(input.dtype());
  // The output's layout is the eager kernel's (channels-last for a channels-last input, else
  // contiguous): the pointwise ops below keep x's, and a later view relies on the strides.
  Tensor x = convert(isChannelsLast(input) ? input : ops::contiguous(input), ct);
  auto perChannel = [&](const Tensor& t) { return ops::reshape(convert(t, ct), IntArrayRef(shape)); };
  Tensor mean, invstd, saveMean, saveInvstd;
  if (training) {
    Tensor var = ops::varCorrection(x, IntArrayRef(dims), Scalar(int64_t(0)), true);
    mean = ops::mean(x, IntArrayRef(dims), true);
    invstd = ops::rsqrt(ops::add(var, Scalar(eps)));
    const std::vector<int64_t> flat{c};
    saveMean = convert(ops::reshape(mean, IntArrayRef(flat)), statType);
    saveInvstd = convert(ops::reshape(invstd, IntArrayRef(flat)), statType);
    const int64_t count = c ? input.numel() / c : 0;
    if (runningMean) {
      Tensor updated = ops::add(ops::mul(ops::reshape(mean, IntArrayRef(flat)), Scalar(momentum)),
                                ops::mul(convert(*runningMean, ct), Scalar(1 - momentum)));
      ops::copy_(*runningMean, convert(updated, runningMean->dtype()));
    }
    if (runningVar) {
      // count / (count - 1): inf for one value per channel, and 0 * inf gives eager's NaN.
      const double bessel = count > 1 ? double(count) / double(count - 1) : INFINITY;
      Tensor unbiased = ops::mul(ops::reshape(var, IntArrayRef(flat)), Scalar(bessel));
      Tensor updated = ops::add(ops::mul(unbiased, Scalar(momentum)),
                                ops::mul(convert(*runningVar, ct), Scalar(1 - momentum)));
      ops::copy_(*runningVar, convert(updated, runningVar->dtype()));
    }
  } else {
    mean = perChannel(*runningMean);
    invstd = ops::rsqrt(ops::add(perChannel(*runningVar), Scalar(eps)));
    saveMean = ops::empty(IntArrayRef(std::vector<int64_t>{0}), statType, input.device());
    saveInvstd = ops::empty(IntArrayRef(std::vector<int64_t>{0}), statType, input.device());
  }
  Tensor out = ops::mul(ops::sub(x, mean), invstd);
  if (weight) out = ops::mul(out, perChannel(*weight));
  if (bias) out = ops::add(out, perChannel(*bias));
  return {convert(out, input.dtype()), saveMean, saveInvstd};
}

} // namespace kiln::decompositions
