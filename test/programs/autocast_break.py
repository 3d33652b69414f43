"""A graph break (print) inside `with T.autocast("cpu", dtype=T.bfloat16)`: the matmuls on both
sides of the break run in bfloat16, the graphs before and after compile."""
from cutil import randn, rng

TAGS = ["graph-break", "autocast"]
RTOL, ATOL = 2e-2, 2e-2


def build(T):
    r = rng(35)
    w = randn(T, r, 8, 8)

    def fn(x):
        h = x.relu() + 1
        with T.autocast("cpu", dtype=T.bfloat16):
            a = h @ w
            print("inside autocast")
            b = a @ w
            c = b.float() + 1
        return a.float(), b.float(), a.dtype == T.bfloat16, c.sum(), (c * 2).exp()

    return fn, [(randn(T, r, 4, 8),)]
