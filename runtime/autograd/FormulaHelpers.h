// Helpers that derivative formulas (the `derivatives:` entries of ir/ops/*.yaml) call: written
// in ops, so every backward they build is itself differentiable.
#pragma once
#include <cstdint>
#include <optional>
#include <vector>

#include "runtime/TensorImpl.h"
#include "runtime/autograd/LinalgFormulas.h"

namespace kiln::autograd {

bool isExpandableTo(IntArrayRef shape, IntArrayRef desired);
// Sums `grad` down to `shape` (the inverse of broadcasting `shape` up to grad's shape).
Tensor sumTo(const Tensor& grad, IntArrayRef shape);
// The reduced dims of a reduction over `dims` (all dims when empty/none) of a tensor of `ndim` dims.
std::vector<int64_t> reducedDims(std::optional<IntArrayRef> dims, int64_t ndim);
// How many elements a reduction over `dims` of a tensor of `sizes` folds into one (1 for a 0-d tensor).
int64_t reducedNumel(IntArrayRef sizes, std::optional<IntArrayRef> dims);
// grad of a reduction, with the reduced dims put back (size 1) and expanded to `sizes`.
Tensor expandReduced(const Tensor& grad, IntArrayRef sizes, std::optional<IntArrayRef> dims, bool keepdim);
Tensor sumBackward(const Tensor& grad, IntArrayRef sizes, std::optional<IntArrayRef> dims, bool keepdim);
Tensor meanBackward(const Tensor& grad, IntArrayRef sizes, std::optional<IntArrayRef> dims, bool keepdim);
// amax/amin/max/min without indices: the gradient is shared evenly among the tied extrema.
Tensor extremumBackward(const Tensor& grad, const Tensor& self, const Tensor& result,
                        std::optional<IntArrayRef> dims, bool keepdim);
// max.dim/min.dim/...: the gradient goes to the selected index.
Tensor indexSelectingBackward(const Tensor& grad, int64_t dim, const Tensor& indices, IntArrayRef sizes,
                              bool keepdim);
Tensor varBackward(const Tensor& grad, const Tensor& self, std::optional<IntArrayRef> dims,
                   double correction, bool keepdim);
Tensor stdBackward(const Tensor& grad, const Tensor& self, const Tensor& result,
                   std::optional<IntArrayRef> dims, double correction, bool keepdim);
Tensor prodBackward(const Tensor& grad, const Tensor& self, const Tensor& result,
                    std::optional<int64_t> dim, bool keepdim);
Tensor logsumexpBackward(const Tensor& grad, const Tensor& self, const Tensor& result, IntArrayRef dims,
                         bool keepdim);
Tensor softmaxBackward(const Tensor& grad, const Tensor& result, int64_t dim, ScalarType inputDtype);
Tensor logSoftmaxBackward(const Tensor& grad, const Tensor& result, int64_t dim, ScalarType inputDtype);
// layer_norm's gradients (input, weight, bias) recomputing mean and rstd from the input.
std::vector<Tensor> layerNormBackward(const Tensor& grad, const Tensor& input, IntArrayRef normalizedShape,
                                      const std::optional<Tensor>& weight, const std::optional<Tensor>& bias,
                                      double eps, const std::vector<bool>& mask);
// Views: the gradient placed back into a zero tensor of the input's sizes.
Tensor selectBackward(const Tensor& grad, IntArrayRef sizes, int64_t dim, int64_t index);
Tensor sliceBackward(const Tensor& grad, IntArrayRef sizes, int64_t dim, std::optional<int64_t> start,
                     std::optional<int64_t> end, int64_t step);
Tensor permuteBackward(const Tensor& grad, IntArrayRef dims);
Tensor squeezeBackward(const Tensor& grad, IntArrayRef sizes);
Tensor unbindBackward(const std::vector<Tensor>& grads, IntArrayRef sizes, ScalarType dtype, int64_t dim);
std::vector<Tensor> catBackward(const Tensor& grad, const std::vector<Tensor>& tensors, int64_t dim);
// mm/bmm/matmul/addmm pieces.
Tensor matmulBackwardSelf(const Tensor& grad, const Tensor& self, const Tensor& other);
Tensor matmulBackwardOther(const Tensor& grad, const Tensor& self, const Tensor& other);
// Pointwise pieces.
Tensor powBackwardSelf(const Tensor& grad, const Tensor& self, const Tensor& exponent);
Tensor powBackwardExponent(const Tensor& grad, const Tensor& self, const Tensor& exponent, const Tensor& result);
Tensor powScalarBackward(const Tensor& grad, const Tensor& self, const Scalar& exponent);
// pow(Scalar self, Tensor exponent): grad * result * log(self), 0 where self == 0 and exponent >= 0.
Tensor powScalarBaseBackward(const Tensor& grad, const Scalar& self, const Tensor& exponent, const Tensor& result);
Tensor clampBackward(const Tensor& grad, const Tensor& self, const std::optional<Scalar>& min,
                     const std::optional<Scalar>& max);
Tensor clampTensorBackward(const Tensor& grad, const Tensor& self, const std::optional<Tensor>& min,
                           const std::optional<Tensor>& max);
// clamp.Tensor's gradients of min and max (PyTorch's clamp_backward_min_max): with both bounds,
// min gets the gradient where self < min < max, max where self > max or max < min (clamp then
// returns max).
std::vector<Tensor> clampBackwardMinMax(const Tensor& grad, const Tensor& self, const std::optional<Tensor>& min,
                                        const std::optional<Tensor>& max, const std::vector<bool>& mask);
Tensor tanhBackward(const Tensor& grad, const Tensor& result);
Tensor sigmoidBackward(const Tensor& grad, const Tensor& result);
Tensor geluBackward(const Tensor& grad, const Tensor& self, const std::string& approximate);
Tensor siluBackward(const Tensor& grad, const Tensor& self);
// maximum/minimum: the gradient goes to the larger (smaller) input, split evenly on ties.
Tensor minmaxGrad(const Tensor& grad, const Tensor& self, const Tensor& other, bool isMax, bool forSelf);
Tensor roundingGrad(const Tensor& grad, const std::optional<std::string>& mode, const Tensor& other);
Tensor roundingGradOther(const Tensor& grad, const std::optional<std::string>& mode, const Tensor& self,
                         const Tensor& other);
Tensor normBackward(const Tensor& grad, const Tensor& self, const Scalar& ord, const Tensor& result,
                    std::optional<IntArrayRef> dims, bool keepdim);
Tensor asStridedBackward(const Tensor& grad, const Tensor& self, IntArrayRef size, IntArrayRef stride,
                         std::optional<int64_t> storageOffset);
Tensor repeatBackward(const Tensor& grad, IntArrayRef sizes, IntArrayRef repeats);
Tensor rollBackward(const Tensor& grad, IntArrayRef shifts, IntArrayRef dims);
// Gradients of index_select and gather: summed into zeros at the indexed places.
// index_put's gradient for `values`: index(grad, indices) summed to values' shape; through a
// single bool mask (runtime/MaskIndex.h) in ops of static shapes, so that it traces.
Tensor indexPutValuesBackward(const Tensor& grad, const std::vector<std::optional<Tensor>>& indices,
                              const Tensor& values);
Tensor indexSelectBackward(const Tensor& grad, IntArrayRef sizes, int64_t dim, const Tensor& index);
Tensor gatherBackward(const Tensor& grad, IntArrayRef sizes, int64_t dim, const Tensor& index);
Tensor zerosLikeGrad(const Tensor& grad, IntArrayRef sizes);
// grad * x with Scalar x (skipped when x == 1).
Tensor scaleBy(const Tensor& grad, const Scalar& x);

} // namespace kiln::autograd
