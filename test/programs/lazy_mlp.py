"""Lazy layers (LazyLinear, LazyConv1d, LazyBatchNorm1d): the first call infers the input sizes,
later calls run the materialized layers."""
from cutil import randn, rng

TAGS = ["nn", "tier2"]
RTOL, ATOL = 1e-4, 1e-5


def build(T):
    nn = T.nn
    T.manual_seed(0)
    model = nn.Sequential(nn.LazyConv1d(4, 3), nn.LazyBatchNorm1d(), nn.ReLU(), nn.Flatten(), nn.LazyLinear(5))
    model.eval()
    x = randn(T, rng(32), 3, 2, 9)
    y = randn(T, rng(33), 3, 2, 9)

    def fn(x):
        return model(x)

    return fn, [(x,), (y,)]
