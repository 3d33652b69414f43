// Derivative formulas of the linalg ops (ir/ops/linalg.yaml's factorizations and solves): PyTorch's
// (torch/csrc/autograd/FunctionsManual.cpp) for real matrices, written in ops so that the
// backward of a compiled graph traces them and a double backward differentiates them.
#pragma once
#include <string>
#include <vector>

#include "runtime/TensorImpl.h"

namespace kiln::autograd {

// A = L L^T (U^T U when upper): L^-T Phi(L^T gL) L^-1, symmetrized; Phi keeps the lower
// triangle with half the diagonal.
Tensor linalgCholeskyBackward(const Tensor& gL, bool upper, const Tensor& L);
// -A^-T g A^-T.
Tensor linalgInvBackward(const Tensor& g, const Tensor& inverse);
// g times det(A)'s cofactor matrix, from an SVD (so it holds at singular A too).
Tensor linalgDetBackward(const Tensor& g, const Tensor& A);
// g_logabsdet A^-T (the sign has no gradient).
Tensor linalgSlogdetBackward(const Tensor& gLogabsdet, const Tensor& A);
// gB = solve(A^T, g); gA = -gB X^T (X^T gB when !left); B's shape says whether it is a vector.
std::vector<Tensor> linalgSolveBackward(const Tensor& g, const Tensor& A, IntArrayRef bSizes, const Tensor& X,
                                        bool left, const std::vector<bool>& mask);
std::vector<Tensor> linalgSolveTriangularBackward(const Tensor& g, const Tensor& A, const Tensor& X, bool upper,
                                                  bool left, bool unitriangular, const std::vector<bool>& mask);
// `defined`: which of the outputs got a gradient (the others arrive as zeros).
Tensor linalgQrBackward(const Tensor& gQ, const Tensor& gR, const std::vector<bool>& defined, const Tensor& Q,
                        const Tensor& R, const std::string& mode);
Tensor linalgEighBackward(const Tensor& gL, const Tensor& gV, const std::vector<bool>& defined, const Tensor& L,
                          const Tensor& V);
// V diag(g) V^T with V recomputed from A.
Tensor linalgEigvalshBackward(const Tensor& g, const Tensor& A, const std::string& uplo);
Tensor linalgSvdBackward(const Tensor& gU, const Tensor& gS, const Tensor& gVh, const std::vector<bool>& defined,
                         const Tensor& U, const Tensor& S, const Tensor& Vh, bool fullMatrices);
// U diag(g) Vh with U, Vh recomputed from A.
Tensor linalgSvdvalsBackward(const Tensor& g, const Tensor& A);

} // namespace kiln::autograd
