"""Sorting-based metrics: ROC AUC from argsort ranks, average precision from a sorted cumsum,
and a median/quantile summary."""
from cutil import randn, rng

TAGS = ["metrics", "sort"]
RTOL, ATOL = 1e-4, 1e-5


def build(T):
    def fn(scores, labels):
        order = scores.argsort(descending=True)
        y = labels[order].float()
        tps = y.cumsum(0)
        fps = (1 - y).cumsum(0)
        tpr = tps / tps[-1]
        fpr = fps / fps[-1]
        auc = T.trapezoid(T.cat([T.zeros(1), tpr]), T.cat([T.zeros(1), fpr]))
        precision = tps / T.arange(1, y.numel() + 1, dtype=T.float32)
        ap = (precision * y).sum() / y.sum()
        ranks = T.empty_like(scores).scatter_(0, scores.argsort(), T.arange(1, scores.numel() + 1).float())
        pos = labels.bool()
        auc_rank = (ranks[pos].sum() - pos.sum() * (pos.sum() + 1) / 2) / (pos.sum() * (~pos).sum())
        return auc, ap, auc_rank, scores.median(), T.quantile(scores, T.tensor([0.25, 0.75]))

    r = rng(40)
    s = randn(T, r, 24)
    labels = ((s + randn(T, r, 24)) > 0).long()
    return fn, [(s, labels)]
