"""vmap of a per-example function (a dot product, an attention score, a nested vmap for a
pairwise distance matrix) inside a compiled function."""
from cutil import randn, rng

TAGS = ["functorch"]
RTOL, ATOL = 1e-4, 1e-5


def build(T):
    r = rng(64)

    def score(q, k):
        return (q * k).sum(-1).softmax(-1) @ k

    def dist(a, b):
        return ((a - b) ** 2).sum().sqrt()

    def fn(q, k, pts):
        s = T.vmap(score)(q, k)
        d = T.func.vmap(T.func.vmap(dist, in_dims=(None, 0)), in_dims=(0, None))(pts, pts)
        dots = T.vmap(T.dot, in_dims=(0, None))(q[:, 0], k[0, 0])
        return s, d, dots

    def make():
        return randn(T, r, 3, 4, 5), randn(T, r, 3, 4, 5), randn(T, r, 6, 2)

    return fn, [make(), make()]
