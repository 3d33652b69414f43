// slice_scatter and select_scatter: a copy of self with src written into one slice or index of
// it (the functional inverses of slice and select, as PyTorch's). Written in ops (clone, the
// view, copy_), so they serve every device, Meta included.
#include "generated/KernelDecls.h"
#include "generated/Ops.h"
#include <cstdint>

namespace kiln::kernels {

namespace {

// copy_ broadcasts; the scatters take exactly the view's shape, as PyTorch's do.
void checkSrcFits(const char* op, const char* part, const Tensor& view, const Tensor& src) {
  KILN_CHECK(view.sizes() == src.sizes(), op, ": expected src to have a size equal to the ", part,
             " of self. src size = ", src.shapeString(), ", ", part, " size = ", view.shapeString());
}

} // namespace

Tensor sliceScatter(const Tensor& self, const Tensor& src, int64_t dim, std::optional<int64_t> start,
                    std::optional<int64_t> end, int64_t step) {
  Tensor out = ops::clone(self);
  Tensor view = ops::slice(out, dim, start, end, step);
  checkSrcFits("slice_scatter", "slice", view, src);
  ops::copy_(view, src, false);
  return out;
}

Tensor selectScatter(const Tensor& self, const Tensor& src, int64_t dim, int64_t index) {
  Tensor out = ops::clone(self);
  Tensor view = ops::select(out, dim, index);
  checkSrcFits("select_scatter", "selected part", view, src);
  ops::copy_(view, src, false);
  return out;
}

} // namespace kiln::kernels
