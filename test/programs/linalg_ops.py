"""torch.linalg's solves, factorizations and norms inside a compiled function: solve, inv, det,
slogdet, qr, svd, svdvals, eigh, norm, with pointwise code around them."""
from cutil import randn, rng

TAGS = ["linalg"]
RTOL, ATOL = 1e-3, 1e-4


def build(T):
    r = rng(66)

    def fn(A, b):
        M = A @ A.mT + T.eye(4) * 2
        x = T.linalg.solve(M, b)
        Minv = T.linalg.inv(M)
        d = T.linalg.det(M)
        sign, logabs = T.linalg.slogdet(M)
        Q, R = T.linalg.qr(A)
        S = T.linalg.svdvals(A)
        evals = T.linalg.eigvalsh(M)
        n = T.linalg.norm(A, dim=(-2, -1)) + T.linalg.vector_norm(b, dim=-1) + T.linalg.matrix_norm(A, ord=1)
        return x.relu(), Minv.sum(-1), d.log() - logabs, sign, R.abs(), (Q @ R - A).abs().amax() < 1e-4, S, evals, n

    def make():
        return randn(T, r, 3, 4, 4), randn(T, r, 3, 4)

    return fn, [make(), make()]
