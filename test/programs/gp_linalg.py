"""Gaussian-process regression and whitening with torch.linalg: an RBF kernel from cdist,
Cholesky factorization, cholesky_solve / solve_triangular, log-determinant from the factor's
diagonal, linalg.solve, inv, slogdet, eigh for ZCA whitening, vector/matrix norms; the
marginal likelihood's gradient to the length scale."""
from cutil import randn, rng

TAGS = ["linalg", "autograd", "tier2"]
RTOL, ATOL = 1e-3, 1e-4


def build(T):
    LA = T.linalg

    def fn(X, y, Xs, log_ls):
        ls = log_ls.exp()
        K = T.exp(-0.5 * T.cdist(X / ls, X / ls).pow(2)) + 0.1 * T.eye(X.shape[0])
        Ks = T.exp(-0.5 * T.cdist(Xs / ls, X / ls).pow(2))
        Lc = LA.cholesky(K)
        alpha = T.cholesky_solve(y[:, None], Lc)
        mean = (Ks @ alpha).squeeze(-1)
        v = LA.solve_triangular(Lc, Ks.T, upper=False)
        var = 1.0 - v.pow(2).sum(0)
        nll = 0.5 * (y[:, None] * alpha).sum() + Lc.diagonal().log().sum()
        g, = T.autograd.grad(nll, [log_ls])
        sol = LA.solve(K, y)
        sign, logdet = LA.slogdet(K)
        C = T.cov(X.T) + 0.01 * T.eye(X.shape[1])
        evals, evecs = LA.eigh(C)
        W = evecs @ T.diag(evals.rsqrt()) @ evecs.T
        white = (X - X.mean(0)) @ W
        return (mean, var, nll, g, sol, sign, logdet, white.T @ white / (X.shape[0] - 1),
                LA.inv(K) @ K, LA.vector_norm(X, ord=2, dim=1), LA.matrix_norm(K), LA.norm(K, "nuc"))

    r = rng(128)
    return fn, [(randn(T, r, 8, 3).double(), randn(T, r, 8).double(), randn(T, r, 4, 3).double(),
                 T.tensor(0.2, dtype=T.float64, requires_grad=True))]
