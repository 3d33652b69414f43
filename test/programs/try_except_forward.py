"""try/except in forward: a KeyError on an optional dict entry, an AttributeError on an optional
module attribute, and a ValueError raised by user code and caught."""
from cutil import init_module, randn, rng

TAGS = ["graph-break"]


def build(T):
    r = rng(25)
    lin = init_module(T, T.nn.Linear(4, 4))
    opts = {"scale": 2.0}

    def check(x):
        if x.dim() != 2:
            raise ValueError("expects 2-D")
        return x

    def fn(x):
        try:
            shift = opts["shift"]
        except KeyError:
            shift = 0.5
        try:
            b = lin.extra_bias
        except AttributeError:
            b = None
        try:
            check(x.unsqueeze(0))
        except ValueError:
            x = x * opts["scale"]
        y = lin(x) + shift
        return y if b is None else y + b

    return fn, [(randn(T, r, 3, 4),) for _ in range(2)]
