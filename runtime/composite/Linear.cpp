// linear: y = input @ weight.T + bias, through addmm where PyTorch fuses the bias.
#include "generated/KernelDecls.h"
#include "generated/Ops.h"
#include <cstdint>

namespace kiln::kernels {

Tensor linear(const Tensor& input, const Tensor& weight, const std::optional<Tensor>& bias) {
  Tensor wt = ops::t(weight);
  if (bias && input.dim() == 2) return ops::addmm(*bias, input, wt);
  if (bias && input.dim() == 3 && input.isContiguous()) {
    // Fold the batch dims into one GEMM with the bias fused, as PyTorch does.
    int64_t b = input.size(0), s = input.size(1);
    Tensor out = ops::addmm(*bias, ops::view(input, {b * s, input.size(2)}), wt);
    return ops::view(out, {b, s, out.size(1)});
  }
  Tensor out = ops::matmul(input, wt);
  return bias ? ops::add(out, *bias) : out;
}

} // namespace kiln::kernels
