"""nn.EmbeddingBag in sum/mean/max modes with 1-D input + offsets (include_last_offset too),
2-D input, per_sample_weights, padding_idx, and a gradient to the table (a recommender's
sparse-feature tower)."""
import numpy as np
from cutil import init_module, randn, rng, tensor

TAGS = ["nn", "embedding", "autograd"]
RTOL, ATOL = 1e-4, 1e-5


def build(T):
    nn, F = T.nn, T.nn.functional
    bag_sum = init_module(T, nn.EmbeddingBag(20, 6, mode="sum"))
    bag_mean = init_module(T, nn.EmbeddingBag(20, 6, mode="mean", padding_idx=0))
    bag_max = init_module(T, nn.EmbeddingBag(20, 6, mode="max"))

    def fn(ids, offsets, w, ids2d):
        a = bag_sum(ids, offsets, per_sample_weights=w)
        b = bag_mean(ids, offsets)
        c = bag_max(ids2d)
        d = F.embedding_bag(ids, bag_sum.weight, T.cat([offsets, T.tensor([ids.shape[0]])]),
                            mode="sum", include_last_offset=True)
        out = T.cat([a, b, c, d], dim=1)
        g, = T.autograd.grad(out.sum(), [bag_sum.weight])
        return out, g

    r = rng(106)
    ids = tensor(T, np.array([1, 0, 4, 4, 9, 0, 13, 2, 19], dtype=np.int64))
    offsets = tensor(T, np.array([0, 2, 5, 7], dtype=np.int64))
    ids2d = tensor(T, r.integers(0, 20, size=(4, 3)).astype(np.int64))
    return fn, [(ids, offsets, randn(T, r, 9), ids2d)]
