"""Multi-head attention written with einsum (projections, scores, weighted sum, output),
plus a bilinear form and a batched trace."""
from cutil import randn, rng

TAGS = ["attention", "einsum"]
RTOL, ATOL = 1e-4, 1e-5


def build(T):
    r = rng(37)
    wq, wk, wv = (randn(T, r, 8, 2, 4) for _ in range(3))
    wo = randn(T, r, 2, 4, 8)

    def fn(x, m):
        q = T.einsum("bld,dhk->bhlk", x, wq)
        k = T.einsum("bsd,dhk->bhsk", m, wk)
        v = T.einsum("bsd,dhk->bhsk", m, wv)
        a = T.einsum("bhlk,bhsk->bhls", q, k).mul(0.5).softmax(dim=-1)
        o = T.einsum("bhls,bhsk,hkd->bld", a, v, wo)
        bil = T.einsum("bi,ij,bj->b", x[:, 0], wq.flatten(1), m[:, 0].repeat(1, 1))
        tr = T.einsum("bii->b", a.flatten(0, 1)[:, :3, :3])
        return o, bil, tr

    return fn, [(randn(T, r, 2, 3, 8), randn(T, r, 2, 5, 8))]
