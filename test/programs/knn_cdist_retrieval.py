"""Nearest-neighbour retrieval as in metric learning / kNN classifiers: cdist (p=2 and p=1),
topk smallest, a majority vote with one_hot sums and argmax, cosine similarity matrices,
pairwise_distance, the hardest-negative mining with masks."""
import numpy as np
from cutil import randn, rng, tensor

TAGS = ["metrics", "indexing", "sort"]
RTOL, ATOL = 1e-4, 1e-5


def build(T):
    F = T.nn.functional

    def fn(q, db, labels, qlabels):
        d2 = T.cdist(q, db)
        d1 = T.cdist(q, db, p=1)
        dist, idx = d2.topk(3, dim=1, largest=False)
        votes = F.one_hot(labels[idx], 4).sum(1)
        pred = votes.argmax(1)
        sim = F.cosine_similarity(q[:, None], db[None], dim=-1)
        pd = F.pairwise_distance(q, db[: q.shape[0]])
        same = qlabels[:, None] == labels[None]
        hardest_neg = d2.masked_fill(same, float("inf")).min(1).values
        hardest_pos = d2.masked_fill(~same, float("-inf")).max(1).values
        acc = (pred == qlabels).float().mean()
        return d2, d1, dist, idx, pred, sim, pd, hardest_neg, hardest_pos, acc

    r = rng(129)
    labels = tensor(T, r.integers(0, 4, size=10).astype(np.int64))
    qlabels = tensor(T, r.integers(0, 4, size=5).astype(np.int64))
    return fn, [(randn(T, r, 5, 6), randn(T, r, 10, 6), labels, qlabels)]
