"""Attention masked by assignment: padded keys set to -inf through a bool mask
(`scores[~keep] = -inf`), padded query rows zeroed through a mask over the leading dims, and
outlier activations clamped in place (`h[h > c] = c`), with gradients. Every write goes through
a bool mask and keeps a static shape: one graph, as torch.compile."""
import numpy as np

from cutil import randn, rng, tensor

TAGS = ["indexing", "attention", "autograd", "tier2"]
RTOL, ATOL = 1e-4, 1e-5


def build(T):
    r = rng(91)
    B, L, D = 3, 6, 8
    w = randn(T, r, D, D, scale=0.5)

    def fn(x, lengths):
        pos = T.arange(L)
        valid = pos[None, :] < lengths[:, None]                      # (B, L)
        keep = valid[:, None, :].expand(B, L, L)                     # keys that exist
        h = x @ w
        h[h > 1.5] = 1.5                                             # clamp outliers in place
        h[h < -1.5] = -1.5
        scores = h @ h.transpose(1, 2) / D ** 0.5
        scores[~keep] = float("-inf")
        p = scores.softmax(-1)
        out = p @ x
        out[~valid] = 0.0                                            # padded query rows
        loss = out.square().mean()
        gx, = T.autograd.grad(loss, [x])
        return out, p, loss, gx

    lengths = [tensor(T, np.array([6, 4, 2], dtype=np.int64)), tensor(T, np.array([3, 6, 5], dtype=np.int64))]
    return fn, [(randn(T, r, B, L, D, requires_grad=True), n) for n in lengths]
