"""Segmentation losses: soft Dice over one-hot targets (F.one_hot, permute to NCHW), pixel-wise
weighted cross entropy on 4-d logits with an ignore index, and IoU from argmax."""
import numpy as np

from cutil import randn, rng, tensor

TAGS = ["loss", "autograd", "tier2"]
RTOL, ATOL = 1e-4, 1e-5


def build(T):
    F = T.nn.functional

    def fn(logits, target):
        C = logits.shape[1]
        probs = logits.softmax(1)
        valid = target != 255
        onehot = F.one_hot(target.clamp(max=C - 1), C).permute(0, 3, 1, 2).float() * valid[:, None]
        inter = (probs * onehot).sum((0, 2, 3))
        dice = 1 - ((2 * inter + 1) / (probs.sum((0, 2, 3)) + onehot.sum((0, 2, 3)) + 1)).mean()
        ce = F.cross_entropy(logits, target, ignore_index=255, weight=T.tensor([1.0, 2.0, 0.5]))
        pred = logits.argmax(1)
        ious = []
        for c in range(C):
            p, t = (pred == c) & valid, (target == c) & valid
            ious.append((p & t).sum() / ((p | t).sum().clamp(min=1)))
        g, = T.autograd.grad(dice + ce, [logits])
        return dice.detach(), ce.detach(), T.stack(ious), g

    r = rng(48)
    t = r.integers(0, 3, size=(2, 5, 5)).astype(np.int64)
    t[0, 0, :2] = 255
    return fn, [(randn(T, r, 2, 3, 5, 5, requires_grad=True), tensor(T, t))]
