"""Order statistics in robust losses and metrics: kthvalue (keepdim), median / nanmedian with
indices along a dim, mode, quantile with each interpolation (and a tensor of q, keepdim),
nanquantile, a trimmed mean by sort and narrow, the median absolute deviation; gradients
through kthvalue, median and quantile."""
import numpy as np

from cutil import randn, rng, tensor

TAGS = ["reduction", "sort", "autograd", "tier2"]
RTOL, ATOL = 1e-4, 1e-5


def build(T):
    def fn(x, labels, withnan):
        kv, ki = T.kthvalue(x, 2, dim=1, keepdim=True)
        med, mi = x.median(dim=0)
        nmed, nmi = withnan.nanmedian(dim=1)
        mo, moi = T.mode(labels, dim=1)
        qs = T.tensor([0.1, 0.5, 0.9])
        q_lin = T.quantile(x, qs, dim=1, keepdim=True)
        q_other = [T.quantile(x, 0.3, dim=0, interpolation=m) for m in ("lower", "higher", "nearest", "midpoint")]
        nq = T.nanquantile(withnan, 0.75, dim=1)
        srt, _ = x.sort(dim=1)
        trimmed = srt.narrow(1, 1, x.shape[1] - 2).mean(1)
        mad = (x - x.median(dim=1, keepdim=True).values).abs().median(dim=1).values
        loss = kv.sum() + med.sum() + q_lin.sum() + trimmed.sum() + mad.sum() + x.median()
        gx, = T.autograd.grad(loss, [x])
        return kv.detach(), ki, med.detach(), mi, nmed, nmi, mo, moi, q_lin.detach(), \
            [q.detach() for q in q_other], nq, trimmed.detach(), mad.detach(), gx

    r = rng(173)
    w = r.standard_normal((4, 6)).astype(np.float32)
    w[0, 2] = np.nan
    w[2, [0, 4]] = np.nan
    labels = np.array([[1, 2, 2, 3, 1], [0, 0, 1, 1, 4], [5, 5, 5, 2, 2], [3, 1, 4, 1, 5]], dtype=np.int64)
    return fn, [(randn(T, r, 4, 7, requires_grad=True), tensor(T, labels), tensor(T, w))]
