// Non-core products in core ATen ops (mm, bmm, mul, sum, views), following
// torch/_decomp/decompositions.py (baddbmm, addmv) and ATen's matmul folding.
#include "compiler/decompositions/CoreAtenSupport.h"
#include "generated/DecompositionDecls.h"
#include <cstdint>

namespace kiln::decompositions {

namespace {

// beta * self + alpha * product, skipping unit factors and ignoring self when beta is 0 (so
// that nan/inf in self do not propagate, as in PyTorch).
Tensor scaledAdd(const Tensor& self, Tensor product, const Scalar& beta, const Scalar& alpha) {
  if (!(alpha.isIntegral() && alpha.toDouble() == 1)) product = ops::mul(product, alpha);
  if (beta.toDouble() == 0) return product; // self broadcasts to the product's shape
  Tensor s = beta.isIntegral() && beta.toDouble() == 1 ? self : ops::mul(self, beta);
  return ops::add(s, product);
}

} // namespace

Tensor baddbmm(const Tensor& self, const Tensor& batch1, const Tensor& batch2, const Scalar& beta,
               const Scalar& alpha) {
  return scaledAdd(self, ops::bmm(batch1, batch2), beta, alpha);
}

Tensor mv(const Tensor& self, const Tensor& vec) {
  return ops::squeeze(ops::mm(self, ops::unsqueeze(vec, 1)), int64_t(1));
}

Tensor addmv(const Tensor& self, const Tensor& mat, const Tensor& vec, const Scalar& beta,
             const Scalar& alpha) {
  return scaledAdd(self, mv(mat, vec), beta, alpha);
}

// sum(a * b) in a's dtype (sum alone would widen integers to int64).
Tensor dot(const Tensor& self, const Tensor& tensor) {
  return ops::sum(ops::mul(self, tensor), std::optional<IntArrayRef>(), false, self.dtype());
}

Tensor outer(const Tensor& self, const Tensor& vec2) {
  return ops::mul(ops::unsqueeze(self, 1), vec2);
}

Tensor ger(const Tensor& self, const Tensor& vec2) { return ops::outer(self, vec2); }

// torch.matmul's cases: dot, mv, mm; a batched left side against a matrix folds its batch
// dims into one mm; otherwise the batch dims broadcast and the product is one bmm.
Tensor matmul(const Tensor& self, const Tensor& other) {
  int64_t da = self.dim(), db = other.dim();
  if (da == 1 && db == 1) return ops::dot(self, other);
  if (da == 2 && db == 1) return ops::mv(self, other);
  if (da == 1 && db == 2) return ops::squeeze(ops::mm(ops::unsqueeze(self, 0), other), int64_t(0));
  if (da == 2 && db == 2) return ops::mm(self, other);
  if (da >= 3 && db <= 2) {
    Tensor b = db == 1 ? ops::unsqueeze(other, 1) : other;
    std::vector<int64_t> outSizes(self.sizes().begin(), self.sizes().end() - 1);
    // The row count spelled out: -1 is ambiguous when k is 0.
    int64_t rows = 1;
    for (int64_t s : outSizes) rows *= s;
    Tensor folded = ops::reshape(self, {rows, self.sizes()[size_t(da - 1)]});
    Tensor out = ops::mm(folded, b);
    if (db == 2) outSizes.push_back(b.sizes()[1]);
    return ops::reshape(out, outSizes);
  }
  // Batched: a [..., n, m] (a vector becomes [1, m]), b [..., m, p] (a vector becomes [m, 1]).
  Tensor a = da == 1 ? ops::unsqueeze(self, 0) : self;
  Tensor b = db == 1 ? ops::unsqueeze(other, 1) : other;
  int64_t n = a.sizes()[size_t(a.dim() - 2)], m = a.sizes()[size_t(a.dim() - 1)];
  int64_t p = b.sizes()[size_t(b.dim() - 1)];
  std::vector<int64_t> batchA(a.sizes().begin(), a.sizes().end() - 2);
  std::vector<int64_t> batchB(b.sizes().begin(), b.sizes().end() - 2);
  size_t nb = std::max(batchA.size(), batchB.size());
  std::vector<int64_t> batch(nb);
  int64_t count = 1;
  for (size_t i = 0; i < nb; ++i) {
    int64_t x = i + batchA.size() >= nb ? batchA[i + batchA.size() - nb] : 1;
    int64_t y = i + batchB.size() >= nb ? batchB[i + batchB.size() - nb] : 1;
    batch[i] = x == 1 ? y : x; // mismatches were rejected by the op itself
    count *= batch[i];
  }
  auto expanded = [&](const Tensor& t, int64_t rows, int64_t cols) {
    std::vector<int64_t> full = batch;
    full.push_back(rows);
    full.push_back(cols);
    return ops::reshape(ops::expand(t, full), {count, rows, cols});
  };
  Tensor out = ops::bmm(expanded(a, n, m), expanded(b, m, p));
  std::vector<int64_t> outSizes = batch;
  if (da > 1) outSizes.push_back(n);
  if (db > 1) outSizes.push_back(p);
  return ops::reshape(out, outSizes);
}

} // namespace kiln::decompositions
