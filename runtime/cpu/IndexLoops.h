// Loops over the "lines" of an indexing op: the positions of an index tensor that differ only
// along `dim`. gather and scatter kernels walk one line in order (an index addresses elements
// of its own line only), so lines run in parallel without two of them touching one element.
#pragma once
#include <cstdint>
#include <omp.h>

#include <algorithm>

#include "runtime/DimVector.h"
#include "runtime/TensorImpl.h"

namespace kiln::cpu {

// Calls f(offsetA, offsetB, offsetC) with the element offsets, under three operands' strides, of
// the first position of every line of `shape` along dim; in parallel when the work is large.
template <typename F>
void forEachLine(IntArrayRef shape, int64_t dim, const DimVector& stridesA,
                 const DimVector& stridesB, const DimVector& stridesC, const F& f) {
  int64_t numel = computeNumel(shape);
  if (numel == 0) return;
  int64_t lines = numel / shape[size_t(dim)];
  int threads = omp_in_parallel() || numel < 32768 ? 1 : omp_get_max_threads();
  threads = int(std::min<int64_t>(threads, lines));
#pragma omp parallel for num_threads(threads) schedule(static) if (threads > 1)
  for (int64_t line = 0; line < lines; ++line) {
    int64_t rest = line, a = 0, b = 0, c = 0;
    for (int64_t d = int64_t(shape.size()) - 1; d >= 0; --d) {
      if (d == dim) continue;
      int64_t coord = rest % shape[size_t(d)];
      rest /= shape[size_t(d)];
      a += coord * stridesA[size_t(d)];
      b += coord * stridesB[size_t(d)];
      c += coord * stridesC[size_t(d)];
    }
    f(a, b, c);
  }
}

} // namespace kiln::cpu
