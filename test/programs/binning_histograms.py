"""Binning as feature engineering and calibration code does it: bucketize into boundaries (right
both ways, int32 output), searchsorted with side="right" and a sorter, histc for a histogram,
bincount with weights and minlength, an expected-calibration-error over confidence bins, and
torch.histogram with given bin edges."""
import numpy as np

from cutil import randint, randn, rng, tensor

TAGS = ["metrics", "indexing", "sort", "tier2"]
RTOL, ATOL = 1e-4, 1e-5


def build(T):
    def fn(x, probs, labels, unsorted):
        bounds = T.tensor([-1.0, -0.25, 0.0, 0.5, 1.5])
        b1 = T.bucketize(x, bounds)
        b2 = T.bucketize(x, bounds, right=True, out_int32=True)
        order = T.argsort(unsorted)
        s1 = T.searchsorted(unsorted, x.flatten()[:6], sorter=order)
        s2 = T.searchsorted(bounds, x, side="right")
        h = T.histc(x, bins=6, min=-2.0, max=2.0)
        conf, pred = probs.max(-1)
        correct = (pred == labels).float()
        bins = T.bucketize(conf, T.linspace(0, 1, 6)[1:-1])
        count = T.bincount(bins, minlength=5)
        acc = T.bincount(bins, weights=correct, minlength=5)
        avg_conf = T.bincount(bins, weights=conf, minlength=5)
        nonempty = count > 0
        ece = ((acc - avg_conf).abs() * nonempty).sum() / conf.shape[0]
        hist, edges = T.histogram(x.flatten(), bins=T.tensor([-3.0, -1.0, 0.0, 1.0, 3.0]))
        return b1, b2, s1, s2, h, count, acc, avg_conf, ece, hist, edges

    r = rng(171)
    logits = r.standard_normal((12, 4)).astype(np.float32) * 2
    probs = np.exp(logits) / np.exp(logits).sum(-1, keepdims=True)
    return fn, [(randn(T, r, 4, 5), tensor(T, probs), randint(T, r, 0, 4, 12),
                 tensor(T, r.permutation(np.arange(8, dtype=np.float32) - 3)))]
