// tril / triu: keep the lower / upper triangle of the last two dims (relative to `diagonal`),
// zero the rest. Zero is all-zero bytes in every dtype, so the masking is a memset per row.
#include <cstdint>
#include <algorithm>
#include <cstring>

#include "generated/KernelDecls.h"
#include "generated/Ops.h"

namespace kiln::kernels {

namespace {

enum class Triangle { Lower, Upper };

Tensor triangle(const char* op, const Tensor& self, int64_t diagonal, Triangle which) {
  KILN_CHECK(self.dim() >= 2, op, ": input tensor must have at least 2 dimensions");
  Tensor out = Tensor::empty(self.sizes(), self.dtype(), self.device());
  if (out.isMeta() || out.numel() == 0) return out;
  ops::copy_(out, self, false);
  int64_t rows = self.size(-2), cols = self.size(-1);
  int64_t matrices = out.numel() / (rows * cols);
  diagonal =
      std::clamp<int64_t>(diagonal, -rows - 1, cols + 1); // same rows kept, no overflow below
  size_t item = elementSize(out.dtype());
  char* base = out.rawData();
  int64_t totalRows = matrices * rows;
#pragma omp parallel for if (out.numel() > 65536)
  for (int64_t r = 0; r < totalRows; ++r) {
    int64_t i = r % rows;
    // Columns [from, to) of row i are outside the kept triangle.
    int64_t from = 0, to = 0;
    if (which == Triangle::Lower) {
      from = std::clamp<int64_t>(i + diagonal + 1, 0, cols);
      to = cols;
    } else {
      to = std::clamp<int64_t>(i + diagonal, 0, cols);
    }
    if (to > from) std::memset(base + size_t(r * cols + from) * item, 0, size_t(to - from) * item);
  }
  return out;
}

} // namespace

Tensor tril(const Tensor& self, int64_t diagonal) {
  return triangle("tril", self, diagonal, Triangle::Lower);
}

Tensor triu(const Tensor& self, int64_t diagonal) {
  return triangle("triu", self, diagonal, Triangle::Upper);
}

} // namespace kiln::kernels
