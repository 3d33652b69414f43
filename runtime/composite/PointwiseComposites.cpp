// Pointwise ops written in terms of others: the Tensor.where method form.
#include "generated/KernelDecls.h"
#include "generated/Ops.h"

namespace kiln::kernels {

// x.where(condition, y) is where(condition, x, y): the method binds the tensor to `self`.
Tensor whereMethod(const Tensor& self, const Tensor& condition, const Tensor& other) {
  return ops::where(condition, self, other);
}

} // namespace kiln::kernels
