// The linalg ops' derivative formulas (LinalgFormulas.h), written in ops: PyTorch's
// FunctionsManual.cpp formulas for real inputs.
#include "runtime/autograd/LinalgFormulas.h"

#include "generated/Ops.h"
#include "runtime/autograd/FormulaHelpers.h"

namespace kiln::autograd {

namespace {

Tensor mT(const Tensor& x) { return ops::transpose(x, -2, -1); }

Tensor eyeLike(const Tensor& x, int64_t n) { return ops::eye(n, x.dtype(), x.device()); }

// The matrices with v's last dim on their diagonals: [..., n] -> [..., n, n].
Tensor diagEmbed(const Tensor& v) {
  return ops::mul(ops::unsqueeze(v, -1), eyeLike(v, v.size(-1)));
}

// X with its diagonal scaled by s.
Tensor scaleDiagonal(const Tensor& X, double s) {
  return ops::add(X, ops::mul(ops::mul(X, eyeLike(X, X.size(-1))), s - 1.0));
}

// prod_{j != i} s_j along the last dim, without dividing (zeros allowed).
Tensor productsExceptEach(const Tensor& s) {
  const int64_t n = s.size(-1);
  Tensor one = ops::ones_like(ops::narrow(s, -1, 0, 1));
  Tensor before = ops::cat({one, ops::cumprod(ops::narrow(s, -1, 0, n - 1), -1)}, -1);
  Tensor reversed = ops::flip(s, std::vector<int64_t>{-1});
  Tensor after = ops::flip(ops::cat({one, ops::cumprod(ops::narrow(reversed, -1, 0, n - 1), -1)}, -1),
                           std::vector<int64_t>{-1});
  return ops::mul(before, after);
}

bool isVectorRhs(const Tensor& A, IntArrayRef b) {
  if (b.size() == 1) return true;
  if (int64_t(b.size()) != A.dim() - 1) return false;
  for (size_t i = 0; i < b.size(); ++i)
    if (b[i] != A.sizes()[i]) return false;
  return true;
}

// U diag(gS) Vh.
Tensor svdValuesBackward(const Tensor& gS, const Tensor& U, const Tensor& Vh) {
  const int64_t m = U.size(-2), n = Vh.size(-1);
  return m >= n ? ops::matmul(U, ops::mul(ops::unsqueeze(gS, -1), Vh))
                : ops::matmul(ops::mul(U, ops::unsqueeze(gS, -2)), Vh);
}

} // namespace

Tensor linalgCholeskyBackward(const Tensor& gL0, bool upper, const Tensor& L0) {
  // Murray (2016), arXiv 1602.07527; gA = L^-T Phi(L^T gL) L^-1, symmetrized.
  Tensor L = upper ? mT(L0) : L0, gL = upper ? mT(gL0) : gL0;
  Tensor phi = scaleDiagonal(ops::tril(ops::matmul(mT(L), gL)), 0.5);
  Tensor gA = ops::linalg_solve_triangular(mT(L), phi, /*upper=*/true, /*left=*/true);
  gA = ops::linalg_solve_triangular(L, gA, /*upper=*/false, /*left=*/false);
  return ops::mul(ops::add(gA, mT(gA)), 0.5);
}

Tensor linalgInvBackward(const Tensor& g, const Tensor& inverse) {
  return ops::neg(ops::matmul(mT(inverse), ops::matmul(g, mT(inverse))));
}

Tensor linalgDetBackward(const Tensor& g, const Tensor& A) {
  // g times the cofactor matrix det(A) A^-T = det(U) det(Vh) U diag(prod_{j != i} s_j) Vh, which
  // holds at singular A too (torch's formula there; elsewhere torch solves with A^T: the same).
  if (A.numel() == 0) return ops::zeros_like(A);
  auto [U, S, Vh] = ops::linalg_svd(A, /*full_matrices=*/false);
  Tensor alpha = ops::mul(ops::mul(ops::linalg_det(U), ops::linalg_det(Vh)), g);
  Tensor D = ops::mul(ops::unsqueeze(alpha, -1), productsExceptEach(S));
  return ops::matmul(ops::mul(U, ops::unsqueeze(D, -2)), Vh);
}

Tensor linalgSlogdetBackward(const Tensor& gLogabsdet, const Tensor& A) {
  // g A^-T: solve(A^T, g I), as torch (a singular A raises: log|det| has no derivative there).
  Tensor d = ops::mul(ops::unsqueeze(ops::unsqueeze(gLogabsdet, -1), -1), eyeLike(A, A.size(-1)));
  return ops::linalg_solve(mT(A), d);
}

std::vector<Tensor> linalgSolveBackward(const Tensor& g, const Tensor& A, IntArrayRef bSizes, const Tensor& X,
                                        bool left, const std::vector<bool>& mask) {
  const bool vector = isVectorRhs(A, bSizes);
  Tensor gB, gA;
  if (vector) {
    gB = ops::squeeze(ops::linalg_solve(mT(A), ops::unsqueeze(g, -1)), -1);
    if (mask[0]) gA = ops::neg(ops::mul(ops::unsqueeze(gB, -1), ops::unsqueeze(X, -2)));
  } else {
    gB = ops::linalg_solve(mT(A), g, left);
    if (mask[0]) gA = ops::neg(left ? ops::matmul(gB, mT(X)) : ops::matmul(mT(X), gB));
  }
  return {mask[0] ? sumTo(gA, A.sizes()) : Tensor(), mask[1] ? sumTo(gB, bSizes) : Tensor()};
}

std::vector<Tensor> linalgSolveTriangularBackward(const Tensor& g, const Tensor& A, const Tensor& X, bool upper,
                                                  bool left, bool unitriangular, const std::vector<bool>& mask) {
  Tensor gB = ops::linalg_solve_triangular(mT(A), g, !upper, left, unitriangular);
  Tensor gA;
  if (mask[0]) {
    gA = ops::neg(left ? ops::matmul(gB, mT(X)) : ops::matmul(mT(X), gB));
    gA = upper ? ops::triu(gA, unitriangular ? 1 : 0) : ops::tril(gA, unitriangular ? -1 : 0);
    gA = sumTo(gA, A.sizes());
  }
  // gB has X's shape; where B's batch was broadcast the engine sums it down to B's shape.
  return {gA, mask[1] ? gB : Tensor()};
}

Tensor linalgQrBackward(const Tensor& gQ, const Tensor& gR, const std::vector<bool>& defined, const Tensor& Q,
                        const Tensor& R, const std::string& mode) {
  KILN_CHECK(mode != "r", "The derivative of linalg.qr depends on Q, which is not computed when mode='r'. Please use "
                          "linalg.qr(A, mode='reduced') if you are going to differentiate through linalg.qr.");
  const int64_t m = Q.size(-2), n = R.size(-1);
  KILN_CHECK(mode == "reduced" || m <= n,
             "The QR decomposition is not differentiable when mode='complete' and nrows > ncols.");
  const bool hasQ = defined.size() > 0 && defined[0], hasR = defined.size() > 1 && defined[1];
  Tensor gA;
  if (hasQ && hasR) gA = ops::sub(ops::matmul(gR, mT(R)), ops::matmul(mT(Q), gQ));
  else if (hasQ) gA = ops::neg(ops::matmul(mT(Q), gQ));
  else gA = ops::matmul(gR, mT(R));
  if (m >= n) {
    Tensor X = ops::triu(gA);
    gA = ops::matmul(Q, scaleDiagonal(ops::add(X, mT(X)), 0.5));
    if (hasQ) gA = ops::add(gA, gQ);
    return ops::linalg_solve_triangular(mT(R), gA, /*upper=*/false, /*left=*/false);
  }
  Tensor negA = ops::neg(gA);
  gA = ops::matmul(Q, ops::tril(ops::sub(negA, mT(negA))));
  gA = ops::linalg_solve_triangular(mT(ops::narrow(R, -1, 0, m)), gA, /*upper=*/false, /*left=*/false);
  DimVector zerosShape(R.sizes());
  zerosShape[zerosShape.size() - 1] = n - m;
  gA = ops::cat({gA, ops::zeros(zerosShape, gA.dtype(), gA.device())}, -1);
  if (hasR) gA = ops::add(gA, ops::matmul(Q, gR));
  return gA;
}

Tensor linalgEighBackward(const Tensor& gL, const Tensor& gV, const std::vector<bool>& defined, const Tensor& L,
                          const Tensor& V) {
  const bool hasL = defined.size() > 0 && defined[0], hasV = defined.size() > 1 && defined[1];
  if (!hasV) return ops::matmul(ops::mul(V, ops::unsqueeze(gL, -2)), mT(V));
  // Eigenvectors: the skew part of V^T gV over the eigenvalue gaps (E_ij = L_j - L_i, 1 on the
  // diagonal), the eigenvalues' gradient on the diagonal, conjugated by V.
  Tensor VhgV = ops::matmul(mT(V), gV);
  VhgV = ops::mul(ops::sub(VhgV, mT(VhgV)), 0.5);
  const int64_t n = L.size(-1);
  Tensor E = ops::add(ops::sub(ops::unsqueeze(L, -2), ops::unsqueeze(L, -1)), eyeLike(L, n));
  Tensor gA = ops::div(VhgV, E);
  if (hasL) gA = ops::add(gA, diagEmbed(gL));
  return ops::matmul(V, ops::matmul(gA, mT(V)));
}

Tensor linalgEigvalshBackward(const Tensor& g, const Tensor& A, const std::string& uplo) {
  Tensor V = std::get<1>(ops::linalg_eigh(A, uplo));
  return ops::matmul(ops::mul(V, ops::unsqueeze(g, -2)), mT(V));
}

Tensor linalgSvdBackward(const Tensor& gU0, const Tensor& gS, const Tensor& gVh0, const std::vector<bool>& defined,
                         const Tensor& U0, const Tensor& S, const Tensor& Vh0, bool fullMatrices) {
  // torch's svd_backward (real case) on the reduced factors: distinct singular values assumed,
  // and a full rank where A is not square.
  const int64_t k = S.size(-1);
  Tensor U = fullMatrices ? ops::narrow(U0, -1, 0, k) : U0;
  Tensor Vh = fullMatrices ? ops::narrow(Vh0, -2, 0, k) : Vh0;
  const bool hasU = defined.size() > 0 && defined[0], hasS = defined.size() > 1 && defined[1],
             hasVh = defined.size() > 2 && defined[2];
  if (!hasU && !hasVh) return svdValuesBackward(gS, U, Vh);
  Tensor gU = hasU && fullMatrices ? ops::narrow(gU0, -1, 0, k) : gU0;
  Tensor gVh = hasVh && fullMatrices ? ops::narrow(gVh0, -2, 0, k) : gVh0;
  const int64_t m = U.size(-2), n = Vh.size(-1);
  auto skew = [](const Tensor& X) { return ops::sub(X, mT(X)); };
  Tensor S2 = ops::mul(S, S);
  Tensor E = ops::add(ops::sub(ops::unsqueeze(S2, -2), ops::unsqueeze(S2, -1)), eyeLike(S, k));
  Tensor gA;
  if (hasU && hasVh) {
    Tensor UhgU = skew(ops::matmul(mT(U), gU)), VhgV = skew(ops::matmul(Vh, mT(gVh)));
    gA = ops::div(ops::add(ops::mul(UhgU, ops::unsqueeze(S, -2)), ops::mul(ops::unsqueeze(S, -1), VhgV)), E);
  } else if (hasU) {
    gA = ops::mul(ops::div(skew(ops::matmul(mT(U), gU)), E), ops::unsqueeze(S, -2));
  } else {
    gA = ops::mul(ops::unsqueeze(S, -1), ops::div(skew(ops::matmul(Vh, mT(gVh))), E));
  }
  if (hasS) gA = ops::add(gA, diagEmbed(gS));
  if (m > n && hasU) {
    gA = ops::matmul(U, gA);
    Tensor gUSinv = ops::div(gU, ops::unsqueeze(S, -2));
    gA = ops::add(gA, ops::sub(gUSinv, ops::matmul(U, ops::matmul(mT(U), gUSinv))));
    return ops::matmul(gA, Vh);
  }
  if (m < n && hasVh) {
    gA = ops::matmul(gA, Vh);
    Tensor SinvgVh = ops::div(gVh, ops::unsqueeze(S, -1));
    gA = ops::add(gA, ops::sub(SinvgVh, ops::matmul(ops::matmul(SinvgVh, mT(Vh)), Vh)));
    return ops::matmul(U, gA);
  }
  return m >= n ? ops::matmul(U, ops::matmul(gA, Vh)) : ops::matmul(ops::matmul(U, gA), Vh);
}

Tensor linalgSvdvalsBackward(const Tensor& g, const Tensor& A) {
  auto [U, S, Vh] = ops::linalg_svd(A, /*full_matrices=*/false);
  return svdValuesBackward(g, U, Vh);
}

} // namespace kiln::autograd
