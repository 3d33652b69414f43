"""Graph breaks inside `with T.no_grad()`, `with T.enable_grad()` and
`with T.set_grad_enabled(False)` blocks: grad mode on both sides of each break as eager's."""
from cutil import randn, rng

TAGS = ["tier2", "graph-break"]


def build(T):
    r = rng(36)
    w = randn(T, r, 6, 6, requires_grad=True)

    def fn(x):
        with T.no_grad():
            a = x @ w
            print("no_grad")
            b = a @ w
        c = (b @ w).sum()
        with T.set_grad_enabled(False):
            d = c * 2
            print("set_grad_enabled")
            e = d + (x @ w).sum()
        f = (x @ w).tanh().sum()
        return a.requires_grad, b.requires_grad, c.requires_grad, e.requires_grad, f.requires_grad, b, c, e, f

    return fn, [(randn(T, r, 3, 6),)]
