"""Elementwise selection chains: torch.where with scalar and tensor branches, clamp with tensor
bounds, masked_fill / masked_fill_ / masked_scatter, nan_to_num, isnan/isinf masks, clip,
logical ops, heaviside, and the gradient through where/clamp."""
import numpy as np
from cutil import randn, rng, tensor

TAGS = ["pointwise", "masking", "autograd"]
RTOL, ATOL = 1e-5, 1e-6


def build(T):
    def fn(x, lo, hi, y):
        c = T.clamp(x, min=lo, max=hi)
        w = T.where(x > 0, x, 0.1 * x)
        w2 = T.where(c.abs() < 0.5, 1.0, c)
        m = x.masked_fill(x < -1, float("-inf")).softmax(-1)
        z = y.clone()
        z.masked_fill_(T.isnan(z) | T.isinf(z), 0.0)
        n = T.nan_to_num(y, nan=0.5, posinf=9.0, neginf=-9.0)
        ms = T.zeros_like(x).masked_scatter(x > 0, T.arange(x.numel(), dtype=x.dtype).reshape(x.shape))
        keep = T.logical_and(x > -0.5, T.logical_not(x > 1.5)) | T.logical_xor(x > 0, y > 0)
        hv = T.heaviside(x, T.tensor(0.5))
        cl = x.clip(-0.3, 0.3).clamp_(min=-0.2)
        g, = T.autograd.grad((c * w + w2).sum() + (m * x).sum(), [x])
        return c, w, w2, m, z, n, ms, keep, hv, cl, g

    r = rng(112)
    y = r.standard_normal((3, 6)).astype(np.float32)
    y[0, 1], y[1, 2], y[2, 3] = np.nan, np.inf, -np.inf
    return fn, [(randn(T, r, 3, 6, requires_grad=True), randn(T, r, 3, 6, scale=0.3) - 0.5,
                 randn(T, r, 3, 6, scale=0.3) + 0.5, tensor(T, y))]
