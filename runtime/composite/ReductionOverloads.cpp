// Reduction overloads written in terms of other ops: var/std with `unbiased` (a correction of
// 1 or 0), norm (torch.norm's p='fro' or a number) via linalg_vector_norm, and the binary
// max/min (maximum/minimum).
#include <cstdint>
#include <string>

#include "generated/KernelDecls.h"
#include "generated/Ops.h"

namespace kiln::kernels {

namespace {

Scalar correctionOf(bool unbiased) { return Scalar(int64_t(unbiased ? 1 : 0)); }

} // namespace

Tensor varUnbiased(const Tensor& self, bool unbiased) {
  return ops::varCorrection(self, std::nullopt, correctionOf(unbiased), false);
}

Tensor varDim(const Tensor& self, std::optional<IntArrayRef> dim, bool unbiased, bool keepdim) {
  return ops::varCorrection(self, dim, correctionOf(unbiased), keepdim);
}

Tensor stdUnbiased(const Tensor& self, bool unbiased) {
  return ops::stdCorrection(self, std::nullopt, correctionOf(unbiased), false);
}

Tensor stdDim(const Tensor& self, std::optional<IntArrayRef> dim, bool unbiased, bool keepdim) {
  return ops::stdCorrection(self, dim, correctionOf(unbiased), keepdim);
}

std::tuple<Tensor, Tensor> varMeanUnbiased(const Tensor& self, bool unbiased) {
  return ops::varMeanCorrection(self, std::nullopt, correctionOf(unbiased), false);
}

std::tuple<Tensor, Tensor> varMeanDim(const Tensor& self, std::optional<IntArrayRef> dim,
                                      bool unbiased, bool keepdim) {
  return ops::varMeanCorrection(self, dim, correctionOf(unbiased), keepdim);
}

std::tuple<Tensor, Tensor> stdMeanUnbiased(const Tensor& self, bool unbiased) {
  return ops::stdMeanCorrection(self, std::nullopt, correctionOf(unbiased), false);
}

std::tuple<Tensor, Tensor> stdMeanDim(const Tensor& self, std::optional<IntArrayRef> dim,
                                      bool unbiased, bool keepdim) {
  return ops::stdMeanCorrection(self, dim, correctionOf(unbiased), keepdim);
}

Tensor maxOther(const Tensor& self, const Tensor& other) { return ops::maximum(self, other); }

Tensor minOther(const Tensor& self, const Tensor& other) { return ops::minimum(self, other); }

Tensor norm(const Tensor& self, const std::optional<Scalar>& p, std::optional<IntArrayRef> dim,
            bool keepdim, std::optional<ScalarType> dtype) {
  return ops::linalg_vector_norm(self, p.value_or(Scalar(2.0)), dim, keepdim, dtype);
}

// torch.norm with a string p: 'fro' is the 2-norm over at most two dims. Other orders are
// matrix norms; kiln has no linalg.matrix_norm, so 'nuc' is refused.
Tensor normStr(const Tensor& self, const std::string& p, std::optional<IntArrayRef> dim,
               bool keepdim, std::optional<ScalarType> dtype) {
  if (p == "fro") {
    KILN_CHECK(!dim || dim->size() <= 2, "linalg.matrix_norm: dim must be a 2-tuple. Got ",
               [&] {
                 std::string s;
                 for (int64_t d : *dim) s += (s.empty() ? "" : " ") + std::to_string(d);
                 return s;
               }());
    return ops::linalg_vector_norm(self, Scalar(2.0), dim, keepdim, dtype);
  }
  KILN_CHECK(p != "nuc", "norm(): the nuclear norm (p='nuc') is not supported by kiln");
  throw Error(strCat("linalg.matrix_norm: Order ", p, " not supported."));
}

} // namespace kiln::kernels
