"""Advanced-index writes: bool-mask assignment and accumulation (x[mask] = v, x[mask] += v,
x[mask] = tensor), integer-tensor index_put with accumulate, index_add_ and masked_scatter."""
from cutil import randint, randn, rng

TAGS = ["tier2", "indexing"]


def build(T):
    r = rng(73)

    def fn(x, idx, vals):
        y = x.clone()
        mask = y > 0.5
        y[mask] = 0.5
        y[y < -1.0] += 1.0
        z = x * 2
        z[z.abs() < 0.1] = vals.sum()
        w = T.zeros(8, 5)
        w[idx] += x[: idx.shape[0]]
        w.index_put_((idx,), T.ones(idx.shape[0], 5), accumulate=True)
        u = T.zeros(8, 5).index_add_(0, idx, x[: idx.shape[0]] * 3)
        row_mask = x.sum(dim=1) > 0
        v = x.clone()
        v[row_mask, 1:3] = -2.0
        return y, z, w, u, v

    return fn, [(randn(T, r, 8, 5), randint(T, r, 0, 8, 6), randn(T, r, 3)) for _ in range(2)]
