"""String formatting of shapes into a log list, assert on shapes and on values, and
warnings.warn inside forward."""
import warnings

from cutil import randn, rng

TAGS = ["graph-break"]


def build(T):
    r = rng(29)
    log = []

    def fn(x, w):
        assert x.shape[-1] == w.shape[0], f"bad shapes {tuple(x.shape)} {tuple(w.shape)}"
        h = x @ w
        log.append(f"h: {tuple(h.shape)} dtype={h.dtype}")
        assert (h.abs() < 1e6).all(), "overflow"
        if h.shape[0] > 100:
            warnings.warn("large batch")
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            warnings.warn("inside", UserWarning)
        return h.softmax(-1), len(log) > 0

    return fn, [(randn(T, r, 3, 5), randn(T, r, 5, 2)) for _ in range(2)]
