"""Segment reductions as point-cloud / GNN pooling code writes them without torch_scatter:
scatter_reduce with include_self=False for sum, prod, mean, amax, amin (empty segments keep the
initial value), index_add with alpha, index_copy, index_fill, index_reduce (mean, amax); and the
gradients of the sum/mean/amax reductions with respect to the source."""
import numpy as np

from cutil import randn, rng, tensor

TAGS = ["indexing", "gnn", "autograd", "tier2"]
RTOL, ATOL = 1e-4, 1e-5


def build(T):
    def fn(src, index, base):
        idx2 = index.unsqueeze(1).expand_as(src)
        out = {}
        for red in ("sum", "prod", "mean", "amax", "amin"):
            out[red] = base.scatter_reduce(0, idx2, src, reduce=red, include_self=False)
        out["mean_self"] = base.scatter_reduce(0, idx2, src, reduce="mean", include_self=True)
        out["add_alpha"] = base.index_add(0, index, src, alpha=0.5)
        out["copy"] = base.index_copy(0, T.tensor([4, 0]), src[:2])
        out["fill"] = base.index_fill(1, T.tensor([0, 2]), -1.0)
        out["ir_mean"] = base.index_reduce(0, index, src, "mean", include_self=False)
        out["ir_amax"] = base.index_reduce(0, index, src, "amax")
        loss = out["sum"].sum() + (out["mean"] ** 2).sum() + out["amax"].sum() + out["ir_mean"].sum()
        g, = T.autograd.grad(loss, [src])
        return {k: v.detach() for k, v in out.items()}, g

    r = rng(176)
    index = tensor(T, np.array([0, 2, 0, 3, 2, 2], dtype=np.int64))   # segment 1 and 4 are empty
    return fn, [(randn(T, r, 6, 3, requires_grad=True), index, randn(T, r, 5, 3))]
