"""Gradient clipping with torch.nn.utils' signatures: scales (or clamps) each parameter's .grad in place."""
import math

from ... import _C
from ..._creation import tensor
from ..._tensor import Tensor
from ...autograd.grad_mode import no_grad


def _grads(parameters):
    if isinstance(parameters, Tensor):
        parameters = [parameters]
    return [p.grad for p in parameters if getattr(p, "grad", None) is not None]


def clip_grad_norm_(parameters, max_norm, norm_type=2.0, error_if_nonfinite=False, foreach=None):
    """Scales the gradients so that their joint norm (as one vector) is at most max_norm; returns
    that norm (before clipping) as a tensor. foreach is accepted for torch compatibility."""
    grads = _grads(parameters)
    max_norm, norm_type = float(max_norm), float(norm_type)
    if not grads:
        return tensor(0.0)
    with no_grad():
        norms = [g.norm(norm_type) for g in grads]
        if len(norms) == 1:
            total_norm = norms[0]
        else:
            total_norm = _C._ops.stack([n.to(norms[0].dtype) for n in norms]).norm(norm_type)
        if error_if_nonfinite and not math.isfinite(total_norm.item()):
            raise RuntimeError(f"The total norm of order {norm_type} for gradients from `parameters` is non-finite, so it "
                               "cannot be clipped. To disable this error and scale the gradients by the non-finite norm "
                               "anyway, set `error_if_nonfinite=False`")
        clip_coef = (max_norm / (total_norm + 1e-6)).clamp(max=1.0)
        for g in grads:
            g.mul_(clip_coef.to(g.dtype))
    return total_norm


def clip_grad_value_(parameters, clip_value, foreach=None):
    """Clamps every gradient to [-clip_value, clip_value] in place."""
    clip_value = float(clip_value)
    with no_grad():
        for g in _grads(parameters):
            g.clamp_(min=-clip_value, max=clip_value)
