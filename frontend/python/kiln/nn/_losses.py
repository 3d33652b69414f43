"""Less common losses of torch.nn.functional, written over existing ops with ATen's formulas:
gaussian_nll_loss, poisson_nll_loss, hinge_embedding_loss, soft_margin_loss,
multilabel_soft_margin_loss, multi_margin_loss. kiln.nn.functional re-exports them."""
import math

from .. import _C
from ..autograd.grad_mode import no_grad

_ops = _C._ops


def _reduce_by(loss, reduction, valid=("none", "mean", "sum")):
    if reduction not in valid:
        raise ValueError(f"{reduction} is not a valid value for reduction")
    return loss if reduction == "none" else (loss.mean() if reduction == "mean" else loss.sum())


def _reduction(size_average, reduce, reduction):
    from . import functional as F  # the deprecated size_average/reduce pair, as everywhere else
    return F._legacy_reduction(size_average, reduce, reduction)


def gaussian_nll_loss(input, target, var, full=False, eps=1e-6, reduction="mean"):
    """0.5 * (log(max(var, eps)) + (input - target)^2 / max(var, eps)) (+ 0.5 log 2pi if full).
    var may have input's shape, lack its last dim, or differ from it in one size-1 dim."""
    if isinstance(var, float):
        if var < 0:
            raise ValueError("var has negative entry/entries")
        var = var * _ops.ones_like(input)
    elif _ops.any(var < 0):
        raise ValueError("var has negative entry/entries")
    if tuple(var.shape) != tuple(input.shape):
        if tuple(input.shape[:-1]) == tuple(var.shape):
            var = var.unsqueeze(-1)
        elif not (input.dim() == var.dim()
                  and sum(y for x, y in zip(input.shape, var.shape) if x != y) == 1):
            raise ValueError("var is of incorrect size")
    if reduction not in ("none", "mean", "sum"):
        raise ValueError(reduction + " is not valid")
    var = var.clone()
    with no_grad():
        var.clamp_(min=eps)  # the clamp is not differentiated through, as torch's
    loss = 0.5 * (var.log() + (input - target) ** 2 / var)
    if full:
        loss = loss + 0.5 * math.log(2 * math.pi)
    return _reduce_by(loss, reduction)


def poisson_nll_loss(input, target, log_input=True, full=False, size_average=None, eps=1e-8, reduce=None,
                     reduction="mean"):
    """exp(input) - target * input (log_input) or input - target * log(input + eps), plus
    Stirling's term for target > 1 when full."""
    reduction = _reduction(size_average, reduce, reduction)
    if reduction not in ("none", "mean", "sum"):
        raise ValueError(reduction + " is not a valid value for reduction")
    if log_input:
        loss = input.exp() - target * input
    else:
        loss = input - target * (input + eps).log()
    if full:
        stirling = target * target.log() - target + 0.5 * (2 * math.pi * target).log()
        loss = loss + stirling.masked_fill(target <= 1, 0)
    return _reduce_by(loss, reduction)


def hinge_embedding_loss(input, target, margin=1.0, size_average=None, reduce=None, reduction="mean"):
    """input where target == 1, max(0, margin - input) where target == -1 (both terms for any
    other target value, as ATen's)."""
    reduction = _reduction(size_average, reduce, reduction)
    zeros = _ops.zeros_like(input)
    margin_term = _ops.where(target != 1, (margin - input).clamp(min=0), zeros)
    self_term = _ops.where(target != -1, input, zeros)
    return _reduce_by(margin_term + self_term, reduction)


def soft_margin_loss(input, target, size_average=None, reduce=None, reduction="mean"):
    """log(1 + exp(-target * input))."""
    reduction = _reduction(size_average, reduce, reduction)
    return _reduce_by((-input * target).exp().log1p(), reduction)


def multilabel_soft_margin_loss(input, target, weight=None, size_average=None, reduce=None, reduction="mean"):
    """Per-class binary logistic loss averaged over classes: one value per sample."""
    from .functional import logsigmoid
    reduction = _reduction(size_average, reduce, reduction)
    loss = -(target * logsigmoid(input) + (1 - target) * logsigmoid(-input))
    if weight is not None:
        loss = loss * weight
    class_dim = input.dim() - 1
    loss = loss.sum(dim=class_dim) / input.size(class_dim)
    if reduction not in ("none", "mean", "sum"):
        raise ValueError(reduction + " is not valid")
    return _reduce_by(loss, reduction)


def multi_margin_loss(input, target, p=1, margin=1.0, weight=None, size_average=None, reduce=None,
                      reduction="mean"):
    """Multi-class hinge: sum over classes j != y of max(0, margin - x[y] + x[j])^p (times
    weight[y]), divided by the class count."""
    reduction = _reduction(size_average, reduce, reduction)
    if p != 1 and p != 2:
        raise ValueError("only p == 1 and p == 2 supported")
    if weight is not None and weight.dim() != 1:
        raise ValueError("weight must be one-dimensional")
    if input.dim() > 2:
        raise RuntimeError(f"Expected non-empty vector or matrix with optional 0-dim batch size, but got: "
                           f"{list(input.shape)}")
    squeeze = input.dim() <= 1
    x = input.reshape(1, -1) if squeeze else input
    y = target.reshape(-1)
    n, c = x.shape
    if y.numel() != n:
        raise RuntimeError(f"inconsistent target size, expected {n} but got {list(target.shape)}")
    picked = x.gather(1, y.unsqueeze(1))
    z = (margin - picked + x).clamp(min=0)
    if p == 2:
        z = z * z
    if weight is not None:
        z = z * weight[y].unsqueeze(1)
    # The target's own column contributes margin^p; ATen skips it.
    z = z.masked_fill(_ops.arange(c, device=x.device).unsqueeze(0) == y.unsqueeze(1), 0)
    loss = z.sum(1) / c
    if squeeze and reduction == "none":
        loss = loss.reshape(target.shape)
    return _reduce_by(loss, reduction)
