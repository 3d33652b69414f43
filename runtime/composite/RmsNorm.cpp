// rms_norm written in other ops: x * rsqrt(mean(x^2) + eps) * weight over the trailing
// normalized_shape dims, computed in float32 for 16-bit inputs as PyTorch does.
#include <cstdint>
#include <limits>
#include <string>
#include <vector>

#include "generated/KernelDecls.h"
#include "generated/Ops.h"
#include "runtime/Error.h"

namespace kiln::kernels {

Tensor rmsNorm(const Tensor& input, IntArrayRef normalized_shape, const std::optional<Tensor>& weight,
               std::optional<double> eps) {
  int64_t n = int64_t(normalized_shape.size()), ndim = input.dim();
  KILN_CHECK(ndim >= n, "Input tensor must have at least ", n, " dimensions, but got ", ndim);
  bool matches = n >= 1;
  for (int64_t i = 0; matches && i < n; ++i) matches = input.size(ndim - n + i) == normalized_shape[size_t(i)];
  if (!matches) {
    std::string trailing = shapeString(normalized_shape); // "[3, 4]": PyTorch prints "[*3, 4]"
    throw Error(strCat("Given normalized_shape=", shapeString(normalized_shape), ", expected input with shape [*",
                       trailing.substr(1), ", but got input of size", input.shapeString()));
  }
  if (weight)
    KILN_CHECK(weight->sizes() == normalized_shape, "rms_norm: expected weight of shape ",
               shapeString(normalized_shape), ", got ", weight->shapeString());
  if (!isFloatingType(input.dtype())) throwUnsupportedDtype("rms_norm", input.dtype());
  bool lowPrecision = input.dtype() == ScalarType::Float16 || input.dtype() == ScalarType::BFloat16;
  Tensor x = lowPrecision ? ops::to(input, ScalarType::Float32) : input;
  // eps=None is the epsilon of the compute type (float32 for 16-bit inputs).
  double epsilon = eps ? *eps
                       : (x.dtype() == ScalarType::Float64 ? std::numeric_limits<double>::epsilon()
                                                           : double(std::numeric_limits<float>::epsilon()));
  std::vector<int64_t> dims;
  for (int64_t d = ndim - n; d < ndim; ++d) dims.push_back(d);
  Tensor meanSquare = ops::mean(ops::square(x), IntArrayRef(dims), true);
  Tensor result = ops::mul(x, ops::rsqrt(ops::add(meanSquare, epsilon)));
  if (lowPrecision) result = ops::to(result, input.dtype());
  return weight ? ops::mul(result, *weight) : result;
}

} // namespace kiln::kernels
