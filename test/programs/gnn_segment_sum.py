"""GNN message passing: per-edge messages gathered from source nodes, summed per destination
with scatter_add / index_add, degree normalisation, a segment mean and max; gradients."""
import numpy as np

from cutil import init_module, randn, rng, tensor

TAGS = ["indexing", "nn", "autograd", "tier2"]
RTOL, ATOL = 1e-4, 1e-5


def build(T):
    nn = T.nn
    lin = init_module(T, nn.Linear(5, 5))

    def fn(x, src, dst):
        n = x.shape[0]
        msg = lin(x)[src]                                            # [E, 5]
        agg = T.zeros_like(x).scatter_add(0, dst[:, None].expand_as(msg), msg)
        deg = T.zeros(n).index_add_(0, dst, T.ones(dst.shape[0]))
        mean = agg / deg.clamp(min=1)[:, None]
        mx = T.full_like(x, float("-inf")).scatter_reduce(0, dst[:, None].expand_as(msg), msg,
                                                          reduce="amax", include_self=True)
        mx = T.where(deg[:, None] > 0, mx, T.zeros_like(mx))
        h = T.relu(mean + x) + mx
        gx, gw = T.autograd.grad(h.sum(), [x, lin.weight])
        return h.detach(), deg, gx, gw

    r = rng(38)
    src = tensor(T, np.array([0, 1, 2, 3, 4, 0, 2, 5, 1], dtype=np.int64))
    dst = tensor(T, np.array([1, 2, 3, 4, 0, 2, 0, 1, 1], dtype=np.int64))
    return fn, [(randn(T, r, 6, 5, requires_grad=True), src, dst)]
