"""Preprocessing written with NumPy on a tensor's numpy view (standardize, clip, cast), then a
model on the result: one graph, as torch.compile."""
import numpy as np

from cutil import init_module, randn, rng

TAGS = ["numpy"]


def build(T):
    r = rng(32)
    model = init_module(T, T.nn.Sequential(T.nn.Linear(6, 8), T.nn.Tanh(), T.nn.Linear(8, 3)))

    def fn(x):
        a = x.numpy()
        mu = a.mean(axis=0, keepdims=True)
        sd = a.std(axis=0, keepdims=True) + 1e-5
        z = np.clip((a - mu) / sd, -3.0, 3.0)
        h = T.from_numpy(z.astype(np.float32))
        with T.no_grad():
            out = model(h)
        return out.softmax(dim=-1), T.from_numpy(np.abs(z).sum(axis=1))

    return fn, [(randn(T, r, 9, 6, scale=3.0),), (randn(T, r, 9, 6),)]
