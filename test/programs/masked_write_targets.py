"""Masked writes in loss code: label smoothing built by assignment (`target[ignore] = 0`, a
number written through a mask over the classes), a learned row written through a mask (its
gradient sums over the selected rows), a float64 value written into float32 through a mask, and
in-place index_put_ with accumulate. Static shapes throughout: one graph, as torch.compile."""
import numpy as np

from cutil import randn, rng, tensor

TAGS = ["indexing", "loss", "autograd", "tier2"]
RTOL, ATOL = 1e-4, 1e-5


def build(T):
    r = rng(57)
    N, C = 7, 5

    def fn(logits, y, row, scale):
        ignore = y < 0
        target = T.zeros(N, C).scatter(1, y.clamp(min=0)[:, None], 1.0)
        smooth = T.full((C,), 0.1 / C)
        target = target * 0.9
        target += smooth
        target[ignore] = 0.0
        rare = target.sum(0) < 1.0                                   # classes seldom the target
        target[:, rare] = 0.05                                       # a mask over dim 1
        logp = logits.log_softmax(-1)
        per_row = -(target * logp).sum(-1)
        h = logits.clone()
        h[y == 2] = row * 2                                          # a (C,) row into the selected rows
        h[h.detach() < -2.0] = scale.double()                        # one float64 value into float32
        h.index_put_((ignore,), scale * 0.5, accumulate=True)
        loss = per_row.sum() / (~ignore).sum() + h.square().mean()
        g = T.autograd.grad(loss, [logits, row, scale])
        return loss, h, target, g

    ys = [np.array([0, 2, -1, 4, 2, 1, -1]), np.array([3, 3, 2, -1, 0, 2, 1])]
    return fn, [(randn(T, r, N, C, requires_grad=True), tensor(T, yy.astype(np.int64)),
                 randn(T, r, C, requires_grad=True), randn(T, r, requires_grad=True)) for yy in ys]
