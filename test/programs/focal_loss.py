"""Focal loss (binary and multi-class) with alpha weighting; gradients of the logits."""
from cutil import randint, randn, rng

TAGS = ["loss", "autograd", "tier2"]
RTOL, ATOL = 1e-4, 1e-5


def build(T):
    F = T.nn.functional

    def binary_focal(logits, targets, alpha=0.25, gamma=2.0):
        p = logits.sigmoid()
        ce = F.binary_cross_entropy_with_logits(logits, targets, reduction="none")
        p_t = p * targets + (1 - p) * (1 - targets)
        a_t = alpha * targets + (1 - alpha) * (1 - targets)
        return (a_t * ce * (1 - p_t) ** gamma).mean()

    def multiclass_focal(logits, y, gamma=1.5):
        logp = F.log_softmax(logits, dim=-1).gather(1, y.unsqueeze(1)).squeeze(1)
        return (-(1 - logp.exp()).pow(gamma) * logp).sum() / y.numel()

    def fn(a, t, b, y):
        l1, l2 = binary_focal(a, t), multiclass_focal(b, y)
        ga, gb = T.autograd.grad(l1 + l2, [a, b])
        return l1.detach(), l2.detach(), ga, gb

    r = rng(30)
    t = (randn(T, r, 6, 5) > 0.3).float()
    return fn, [(randn(T, r, 6, 5, requires_grad=True), t, randn(T, r, 9, 4, requires_grad=True),
                 randint(T, r, 0, 4, 9))]
