"""A multivariate Gaussian's log-likelihood through the Cholesky factor (cholesky,
solve_triangular, the log of its diagonal) and its gradient wrt the mean and the covariance's
factor, inside a compiled function."""
import math

from cutil import randn, rng

TAGS = ["linalg", "autograd"]
RTOL, ATOL = 1e-4, 1e-4


def build(T):
    r = rng(65)

    def fn(x, mu, L0):
        cov = L0 @ L0.mT + T.eye(4) * 0.5
        L = T.linalg.cholesky(cov)
        z = T.linalg.solve_triangular(L, (x - mu).unsqueeze(-1), upper=False).squeeze(-1)
        logdet = 2 * L.diagonal(dim1=-2, dim2=-1).log().sum(-1)
        ll = -0.5 * ((z * z).sum(-1) + logdet + 4 * math.log(2 * math.pi))
        loss = -ll.mean()
        gmu, gL0 = T.autograd.grad(loss, [mu, L0])
        return loss.detach(), gmu, gL0

    def make():
        return randn(T, r, 7, 4), randn(T, r, 4, requires_grad=True), randn(T, r, 4, 4, requires_grad=True)

    return fn, [make(), make()]
