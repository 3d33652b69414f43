// Normalizations in core ATen ops, following torch/_decomp/decompositions.py (native_layer_norm).
#include "compiler/decompositions/CoreAtenSupport.h"
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
  Tensor x = convert(input, computationDtype(input.dtype()));
  Tensor var = ops::varCorrection(x, IntArrayRef(dims), Scalar(int64_t(0)), true);
  Tensor mean = ops::mean(x, IntArrayRef(dims), true);
  Tensor out = ops::mul(ops::sub(x, mean), ops::rsqrt(ops::add(var, Scalar(eps))));
  if (weight) out = ops::mul(out, *weight);
  if (bias) out = ops::add(out, *bias);
  return convert(out, input.dtype());
}

} // namespace kiln::decompositions
