// Rows along one dim of a contiguous tensor, for the kernels that read a whole row before
// writing it (softmax, layer_norm, cumulative scans). The tensor is seen as [outer, n, inner]:
// with inner == 1 a row is contiguous; otherwise neighbouring rows are handled together as
// lanes (element j of lane l at j * inner + l), which keeps the loops vectorizable.
#pragma once
#include <cstdint>
#include <omp.h>

#include <algorithm>

#include "generated/Ops.h"
#include "runtime/TensorImpl.h"

namespace kiln::cpu {

struct RowLayout {
  int64_t outer = 1, n = 1, inner = 1;
};

// The layout of rows along `dim` (already wrapped) of a tensor with these sizes; a 0-d tensor is
// one row of one element.
inline RowLayout rowLayout(IntArrayRef sizes, int64_t dim) {
  RowLayout l;
  for (int64_t d = 0; d < int64_t(sizes.size()); ++d) {
    if (d < dim) l.outer *= sizes[size_t(d)];
    else if (d == dim) l.n = sizes[size_t(d)];
    else l.inner *= sizes[size_t(d)];
  }
  return l;
}

// t itself when contiguous, otherwise a contiguous copy.
inline Tensor contiguousInput(const Tensor& t) {
  if (t.isContiguous()) return t;
  Tensor out = Tensor::empty(t.sizes(), t.dtype(), t.device());
  if (!t.isMeta()) ops::copy_(out, t);
  return out;
}

// Calls f(base, lanes) for every block of at most maxLanes neighbouring rows: base is the offset
// of the block's first element, lanes its row count (1 when rows are contiguous). Parallel over
// blocks when the tensor is large.
template <typename F> void forEachRowBlock(const RowLayout& l, int64_t maxLanes, const F& f) {
  const int64_t lanes = l.inner == 1 ? 1 : maxLanes;
  const int64_t blocksPerOuter = (l.inner + lanes - 1) / lanes;
  const int64_t blocks = l.outer * blocksPerOuter;
  if (blocks == 0 || l.n == 0) return;
  const int64_t work = l.outer * l.n * l.inner;
  int threads = omp_in_parallel() || work < 32768 ? 1 : omp_get_max_threads();
  threads = int(std::min<int64_t>(threads, blocks));
#pragma omp parallel for num_threads(threads) schedule(static) if (threads > 1)
  for (int64_t b = 0; b < blocks; ++b) {
    int64_t o = b / blocksPerOuter, l0 = b % blocksPerOuter * lanes;
    f(o * l.n * l.inner + l0, std::min(lanes, l.inner - l0));
  }
}

} // namespace kiln::cpu
