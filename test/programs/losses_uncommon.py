"""Less common loss functions inside one compiled function, each equal to eager's. Graph counts as
torch.compile's (2/1: gaussian_nll_loss checks its variance with .item()); the distance function
defined inside the compiled code is traced through triplet_margin_with_distance_loss. (ctc_loss
has its own program, ctc_loss_train.py.)"""
import numpy as np

from cutil import randint, randn, rng, tensor

TAGS = ["tier2", "losses"]
RTOL, ATOL = 1e-4, 1e-5


def build(T):
    r = rng(37)
    F = T.nn.functional

    def fn(a, b, c, pos, target, labels, ml_target, weight):
        out = []
        out.append(F.poisson_nll_loss(a, b.abs()))
        out.append(F.poisson_nll_loss(a.exp(), b.abs(), log_input=False, full=True))
        out.append(F.gaussian_nll_loss(a, b, c.abs() + 0.1))
        out.append(F.kl_div(F.log_softmax(a, 1), F.log_softmax(b, 1), reduction="batchmean", log_target=True))
        out.append(F.kl_div(F.log_softmax(a, 1), F.softmax(b, 1), reduction="sum"))
        out.append(F.huber_loss(a, b, delta=0.5))
        out.append(F.smooth_l1_loss(a, b, beta=0.3))
        out.append(F.margin_ranking_loss(a[:, 0], b[:, 0], pos[:, 0], margin=0.2))
        out.append(F.hinge_embedding_loss(a, pos, margin=0.5))
        out.append(F.multilabel_margin_loss(a, ml_target))
        out.append(F.multilabel_soft_margin_loss(a, (b > 0).float()))
        out.append(F.soft_margin_loss(a, pos))
        out.append(F.cosine_embedding_loss(a, b, pos[:, 0], margin=0.1))
        out.append(F.triplet_margin_loss(a, b, c, margin=0.7, p=2))
        out.append(F.triplet_margin_with_distance_loss(
            a, b, c, distance_function=lambda u, v: 1 - F.cosine_similarity(u, v), margin=0.3))
        out.append(F.multi_margin_loss(a, labels, p=1, margin=0.8))
        out.append(F.multi_margin_loss(a, labels, p=2, weight=weight))
        out.append(F.nll_loss(F.log_softmax(a, 1), target, weight=weight, ignore_index=1))
        out.append(F.nll_loss(F.log_softmax(a, 1), target, reduction="none"))
        out.append(F.cross_entropy(a, target, weight=weight, label_smoothing=0.1))
        out.append(F.binary_cross_entropy(a.sigmoid(), (b > 0).float(), weight=c.abs()))
        out.append(F.l1_loss(a, b, reduction="sum"))
        return out

    n, k = 4, 5
    pos = np.where(r.standard_normal((n, k)) > 0, 1.0, -1.0).astype(np.float32)
    ml = np.full((n, k), -1, dtype=np.int64)
    ml[:, 0] = [1, 0, 3, 2]
    ml[:, 1] = [2, 4, -1, 0]
    args = (randn(T, r, n, k), randn(T, r, n, k), randn(T, r, n, k), tensor(T, pos),
            tensor(T, np.array([0, 1, 4, 2], dtype=np.int64)), randint(T, r, 0, k, n), tensor(T, ml),
            tensor(T, r.uniform(0.5, 1.5, k).astype(np.float32)))
    return fn, [args]
