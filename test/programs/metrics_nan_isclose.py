"""Evaluation-loop metric code: nan_to_num on logits with infs, isfinite masks, nanmean and nansum
over per-class scores with empty classes (0/0), a per-class IoU from bincount of a confusion
index, isclose with rtol/atol and equal_nan, allclose to decide early stopping (a Python bool),
torch.equal, and count_nonzero."""
import numpy as np

from cutil import randint, randn, rng, tensor

TAGS = ["metrics", "pointwise", "tier2"]
RTOL, ATOL = 1e-5, 1e-6


def build(T):
    C = 4

    def fn(logits, pred, target, prev, cur):
        clean = T.nan_to_num(logits, nan=0.0, posinf=1e4, neginf=-1e4)
        finite = T.isfinite(logits).sum()
        idx = target * C + pred
        conf = T.bincount(idx, minlength=C * C).view(C, C).float()
        tp = conf.diag()
        union = conf.sum(0) + conf.sum(1) - tp
        iou = tp / union                      # nan for an absent class
        miou = iou.nanmean()
        tot = T.nansum(iou)
        close = T.isclose(prev, cur, rtol=1e-3, atol=1e-4)
        close_nan = T.isclose(prev, cur, equal_nan=True)
        stop = T.allclose(prev, cur, rtol=1e-2, atol=1e-3)
        same = T.equal(pred, pred.clone())
        nz = T.count_nonzero(conf, dim=1)
        acc = (pred == target).float().mean()
        return clean, finite, iou, miou, tot, close, close_nan, stop, same, nz, acc, \
            float(acc) if stop else -1.0

    r = rng(174)
    lg = r.standard_normal((3, 5)).astype(np.float32)
    lg[0, 1], lg[1, 2], lg[2, 3] = np.inf, -np.inf, np.nan
    prev = r.standard_normal(6).astype(np.float32)
    prev[3] = np.nan
    cur = prev + np.float32(1e-4)
    pred = randint(T, r, 0, 3, 20)
    target = randint(T, r, 0, 3, 20)
    return fn, [(tensor(T, lg), pred, target, tensor(T, prev), tensor(T, cur)),
                (tensor(T, lg), pred, target, tensor(T, prev), tensor(T, prev + 0.5))]
