"""Scans: cumsum/cumprod over dims (with dtypes), logcumsumexp, cummax, a discounted return
computed backwards with flip, and an exclusive prefix sum; gradients through cumsum/cumprod."""
from cutil import randn, rng

TAGS = ["scan", "autograd", "tier2"]
RTOL, ATOL = 1e-4, 1e-5


def build(T):
    def fn(x, rewards):
        a = x.cumsum(dim=1)
        b = (x * 0.3).cumprod(dim=0)
        c = T.logcumsumexp(x, dim=1)
        m, i = T.cummax(x, dim=1)
        gamma = 0.9
        disc = gamma ** T.arange(rewards.shape[0], dtype=rewards.dtype)
        ret = (rewards * disc).flip(0).cumsum(0).flip(0) / disc
        excl = T.cat([T.zeros(1, dtype=T.int64), (rewards > 0).long().cumsum(0)[:-1]])
        ints = T.arange(1, 6).cumprod(0)
        gx, = T.autograd.grad((a * b).sum() + c.sum(), [x])
        return a.detach(), b.detach(), c.detach(), m.detach(), i, ret, excl, ints, gx

    r = rng(39)
    return fn, [(randn(T, r, 4, 5, requires_grad=True), randn(T, r, 7))]
