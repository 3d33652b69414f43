"""einsum as model code writes it: bilinear forms, batched outer products, ellipsis broadcasting,
traces and diagonals (repeated indices), a three-operand contraction, implicit output mode, and
gradients through them."""
from cutil import randn, rng

TAGS = ["einsum", "autograd"]
RTOL, ATOL = 1e-4, 1e-4


def build(T):
    def fn(a, b, W, m):
        bil = T.einsum("bi,oij,bj->bo", a, W, b)
        outer = T.einsum("bi,bj->bij", a, b)
        ell = T.einsum("...ij,...jk->...ik", m, m)
        tr = T.einsum("bii->b", m)
        diag = T.einsum("bii->bi", m)
        implicit = T.einsum("ij,jk", a[:, :4].T, b[:, :4])
        sum_all = T.einsum("bij->", outer)
        bmm = T.einsum("bhqd,bhkd->bhqk", m.unsqueeze(1), m.unsqueeze(1))
        loss = bil.sum() + ell.square().mean() + tr.sum() + sum_all
        ga, gW = T.autograd.grad(loss, [a, W])
        return bil, outer, ell, tr, diag, implicit, sum_all, bmm, ga, gW

    r = rng(111)
    return fn, [(randn(T, r, 3, 5, requires_grad=True), randn(T, r, 3, 5),
                 randn(T, r, 2, 5, 5, requires_grad=True), randn(T, r, 3, 4, 4))]
