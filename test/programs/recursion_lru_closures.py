"""Recursion over a tree of modules, a functools.lru_cache'd helper of shapes, and closures over
modules built in a loop."""
import functools

from cutil import init_module, randn, rng

TAGS = ["graph-break"]


def build(T):
    r = rng(28)
    leaves = init_module(T, T.nn.ModuleList([T.nn.Linear(4, 4) for _ in range(4)]))

    @functools.lru_cache(maxsize=None)
    def scale_for(n):
        return 1.0 / (n ** 0.5)

    def tree(x, lo, hi):
        if hi - lo == 1:
            return leaves[lo](x)
        mid = (lo + hi) // 2
        return tree(x, lo, mid) + tree(x, mid, hi)

    acts = [lambda t, m=m: T.tanh(m(t)) for m in leaves[:2]]

    def fn(x):
        y = tree(x, 0, 4) * scale_for(x.shape[-1])
        for a in acts:
            y = y + a(x)
        return y

    return fn, [(randn(T, r, 2, 4),) for _ in range(2)]
