"""A function written with NumPy, compiled with ndarray arguments (and a tensor): the arrays are
graph inputs, the NumPy code one graph, a NumPy scalar and a tensor come back."""
import numpy as np

from cutil import randn, rng

TAGS = ["numpy"]


def build(T):
    r = rng(33)

    def fn(a, b, w):
        g = np.tanh(a @ b.T) * 0.5 + np.log1p(np.abs(a)).sum(axis=1, keepdims=True)
        peak = g.max()
        t = T.from_numpy(g.astype(np.float32)) @ w
        return t, peak, g.mean(axis=0).std()

    def arrays(n):
        return (r.standard_normal((n, 5)), r.standard_normal((n, 5)), randn(T, r, n, 3))

    return fn, [arrays(4), arrays(4)]
