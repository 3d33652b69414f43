// repeat, flip and roll: copies between restrided views of the input and the output (the
// strided copy does the work; these kernels only build the geometry).
#include "generated/KernelDecls.h"
#include "generated/Ops.h"
#include "runtime/ViewGeometry.h"
#include <cstdint>

namespace kiln::kernels {

Tensor repeat(const Tensor& self, IntArrayRef repeats) {
  KILN_CHECK(
      repeats.size() >= size_t(self.dim()),
      "Number of dimensions of repeat dims can not be smaller than number of dimensions of tensor");
  size_t n = repeats.size(), lead = n - size_t(self.dim());
  DimVector target(n);
  for (size_t i = 0; i < n; ++i)
    target[i] = repeats[i] * (i < lead ? 1 : self.sizes()[i - lead]);
  Tensor out = Tensor::empty(target, self.dtype(), self.device());
  if (out.isMeta() || out.numel() == 0) return out;
  // out viewed as [r0, s0, r1, s1, ...]; the input broadcast along every r_i.
  DimVector outSizes, outStrides, srcStrides;
  for (size_t i = 0; i < n; ++i) {
    int64_t s = i < lead ? 1 : self.sizes()[i - lead];
    int64_t st = out.strides()[i];
    outSizes.push_back(repeats[i]);
    outSizes.push_back(s);
    outStrides.push_back(s * st);
    outStrides.push_back(st);
    srcStrides.push_back(0);
    srcStrides.push_back(i < lead ? 0 : self.strides()[i - lead]);
  }
  ops::copy_(out.asStrided(outSizes, outStrides, 0),
             self.asStrided(outSizes, srcStrides, self.storageOffset()), false);
  return out;
}

Tensor flip(const Tensor& self, IntArrayRef dims) {
  std::vector<bool> flipped(size_t(std::max<int64_t>(self.dim(), 1)),
                            false); // a 0-d tensor has dim 0 too
  for (int64_t d : dims) {
    int64_t w = wrapDim(d, self.dim());
    KILN_CHECK(!flipped[size_t(w)], "dim ", w, " appears multiple times in the list of dims");
    flipped[size_t(w)] = 1;
  }
  Tensor out = emptyLikePreserve(self, self.dtype());
  if (out.isMeta() || out.numel() == 0) return out;
  // Read the input backwards along flipped dims: negative strides from the last element. The
  // view lives only for this copy.
  DimVector strides(self.strides());
  int64_t offset = self.storageOffset();
  for (size_t d = 0; d < size_t(self.dim()); ++d) {
    if (!flipped[d]) continue;
    offset += (self.sizes()[d] - 1) * strides[d];
    strides[d] = -strides[d];
  }
  ops::copy_(out, self.asStrided(self.sizes(), strides, offset), false);
  return out;
}

namespace {

// Rolls `src` along one dim into a new contiguous tensor (PyTorch: a cat of two narrows; an
// empty input is cloned with its layout).
Tensor rollDim(const Tensor& src, int64_t shift, int64_t dim) {
  dim = wrapDim(dim, src.dim());
  KILN_CHECK_INDEX(src.dim() > 0, "Dimension specified as ", dim, " but tensor has no dimensions");
  if (src.numel() == 0) return emptyLikePreserve(src, src.dtype());
  Tensor out = Tensor::empty(src.sizes(), src.dtype(), src.device());
  if (out.isMeta()) return out;
  int64_t size = src.sizes()[size_t(dim)];
  int64_t s = ((shift % size) + size) % size;
  ops::copy_(ops::slice(out, dim, s, size, 1), ops::slice(src, dim, 0, size - s, 1), false);
  if (s > 0)
    ops::copy_(ops::slice(out, dim, 0, s, 1), ops::slice(src, dim, size - s, size, 1), false);
  return out;
}

} // namespace

Tensor roll(const Tensor& self, IntArrayRef shifts, IntArrayRef dims) {
  KILN_CHECK(!shifts.empty(), "`shifts` required");
  // An empty tensor is cloned before its dim is even looked at (PyTorch's roll_cpu).
  if (dims.size() == 1 && shifts.size() == 1 && self.numel() == 0)
    return emptyLikePreserve(self, self.dtype());
  if (dims.empty() && shifts.size() == 1) {
    Tensor flat = ops::reshape(self, {self.numel()});
    return ops::view(rollDim(flat, shifts[0], 0), self.sizes());
  }
  KILN_CHECK(shifts.size() == dims.size(),
             "shifts and dimensions must align. shifts: ", shifts.size(), ", dims:", dims.size());
  Tensor out = self;
  for (size_t i = 0; i < dims.size(); ++i)
    out = rollDim(out, shifts[i], dims[i]);
  return out;
}

} // namespace kiln::kernels
