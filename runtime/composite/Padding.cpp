// constant_pad_nd written in other ops: negative amounts narrow, positive ones concatenate
// blocks of the fill value, one dim at a time from the last.
#include <cstdint>
#include <vector>

#include "generated/KernelDecls.h"
#include "generated/Ops.h"
#include "runtime/Error.h"

namespace kiln::kernels {

Tensor constantPadNd(const Tensor& self, IntArrayRef pad, const Scalar& value) {
  int64_t pairs = int64_t(pad.size()) / 2;
  KILN_CHECK(pad.size() % 2 == 0, "Length of pad must be even but instead it equals ", pad.size());
  KILN_CHECK(pairs <= self.dim(), "Length of pad should be no more than twice the number of dimensions of the input. Pad length is ",
             pad.size(), " while the input has ", self.dim(), " dimensions.");
  Tensor out = self;
  bool concatenated = false;
  for (int64_t i = 0; i < pairs; ++i) {
    int64_t d = self.dim() - 1 - i, before = pad[size_t(2 * i)], after = pad[size_t(2 * i + 1)];
    int64_t size = self.size(d), newSize = size + before + after;
    KILN_CHECK(newSize >= 0, "The input size ", size, ", plus negative padding ", before, " and ", after,
               " resulted in a negative output size, which is invalid. Check dimension ", d, " of your input.");
    if (before < 0 || after < 0) {
      int64_t start = before < 0 ? -before : 0;
      out = ops::narrow(out, d, start, size - start - (after < 0 ? -after : 0));
    }
    if (before <= 0 && after <= 0) continue;
    std::vector<Tensor> parts;
    std::vector<int64_t> blockShape(out.sizes().begin(), out.sizes().end());
    if (before > 0) {
      blockShape[size_t(d)] = before;
      parts.push_back(ops::full(blockShape, value, out.dtype(), out.device()));
    }
    parts.push_back(out);
    if (after > 0) {
      blockShape[size_t(d)] = after;
      parts.push_back(ops::full(blockShape, value, out.dtype(), out.device()));
    }
    out = ops::cat(parts, d);
    concatenated = true;
  }
  // A new tensor even when nothing was added, never a view of the input (as PyTorch).
  return concatenated ? out : ops::clone(out);
}

} // namespace kiln::kernels
