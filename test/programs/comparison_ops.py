"""Comparisons and their bool results: eq/ne/lt/ge, isclose/allclose/equal, any/all, where,
clamp with tensor bounds, maximum/fmax, and bools flowing into Python `if`."""
from cutil import randn, rng

TAGS = ["pointwise", "graph-break"]


def build(T):
    r = rng(61)

    def fn(x, y, lo, hi):
        m1 = (x == y) | (x != y).logical_not()
        m2 = (x < y) & (x >= lo)
        close = T.isclose(x, x + 1e-7)
        clamped = T.clamp(x, min=lo, max=hi)
        mx = T.maximum(x, y) + T.fmax(x, T.where(m2, y, T.full_like(y, float("nan"))))
        out = T.where(close, clamped, mx)
        if T.allclose(x, x * 1.0):
            out = out + 1
        if T.equal(lo, lo.clone()):
            out = out * 2
        if (x > 100).any():
            out = out - 100
        if (hi >= lo).all():
            out = out + hi
        flag = bool(m1.all())
        return out, m1.sum(), m2.float().mean(), close.all(), flag

    def call():
        x = randn(T, r, 5, 6)
        lo = randn(T, r, 6) - 1.0
        return x, randn(T, r, 5, 6), lo, lo + 2.0

    return fn, [call(), call()]
