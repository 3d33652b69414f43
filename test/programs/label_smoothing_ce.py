"""cross_entropy with label smoothing, class weights and ignore_index, against a manual one."""
import numpy as np

from cutil import randn, rng, tensor

TAGS = ["loss", "autograd", "tier2"]
RTOL, ATOL = 1e-4, 1e-5


def build(T):
    F = T.nn.functional
    r = rng(25)
    w = tensor(T, np.linspace(0.5, 1.5, 7).astype(np.float32))

    def fn(logits, y):
        a = F.cross_entropy(logits, y, label_smoothing=0.1)
        b = F.cross_entropy(logits, y, weight=w, label_smoothing=0.2, ignore_index=-100)
        logp = logits.log_softmax(-1)
        n = logits.shape[-1]
        target = T.full_like(logp, 0.1 / n).scatter(1, y.clamp(min=0)[:, None], 0.9 + 0.1 / n)
        manual = -(target * logp).sum(-1).mean()
        ga, = T.autograd.grad(a + b, [logits])
        return a, b, manual, ga

    y = tensor(T, np.array([0, 3, 6, -100, 2, 5, 1, 4], dtype=np.int64))
    y2 = tensor(T, np.array([1, 1, 2, 3, 5, 0, 6, 4], dtype=np.int64))

    def logits():
        return randn(T, r, 8, 7, requires_grad=True)

    return fn, [(logits(), y), (logits(), y2)]
