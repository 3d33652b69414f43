"""Top-k accuracy (k = 1, 3) and a per-class confusion matrix via bincount-free index_put."""
from cutil import randint, randn, rng

TAGS = ["metrics", "indexing"]


def build(T):
    def fn(logits, y):
        maxk = 3
        _, pred = logits.topk(maxk, dim=1, largest=True, sorted=True)
        correct = pred.t().eq(y.view(1, -1).expand_as(pred.t()))
        res = [correct[:k].reshape(-1).float().sum(0, keepdim=True).mul_(100.0 / y.size(0)) for k in (1, 3)]
        n = logits.shape[1]
        conf = T.zeros(n, n, dtype=T.int64)
        conf.index_put_((y, pred[:, 0]), T.ones_like(y), accumulate=True)
        return res, conf

    r = rng(33)
    return fn, [(randn(T, r, 20, 5), randint(T, r, 0, 5, 20)) for _ in range(2)]
