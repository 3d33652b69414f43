"""Adafactor (torch.optim.Adafactor): its single-tensor CPU path, op by op. A matrix keeps
factored second moments (a row and a column mean of g^2, their outer product over the row mean
as the estimate); a vector keeps the full one; beta2 follows step^beta2_decay, the relative step
size min(lr, 1/sqrt(step)) is scaled by the parameter's RMS and the update clipped by its RMS
over d. As torch's, it reads the step and the norms as Python numbers (a compiled step breaks
there, as torch.compile's does)."""
import math

from .. import _C
from .._dtype_info import finfo
from ..autograd.grad_mode import no_grad
from ._common import LazyStateOptimizer, params_with_grad
from .optimizer import _to_scalar

__all__ = ["Adafactor"]


class Adafactor(LazyStateOptimizer):
    def __init__(self, params, lr=1e-2, beta2_decay=-0.8, eps=(None, 1e-3), d=1.0, weight_decay=0.0, *,
                 foreach=None, maximize=False):
        if hasattr(lr, "numel") and lr.numel() != 1:
            raise ValueError("Tensor lr must be 1-element")
        if not 0.0 <= lr:
            raise ValueError(f"Learning rate should be >= 0 but is: {lr}")
        if not 0.0 >= beta2_decay:
            raise ValueError(f"beta2_decay should be <= 0 but is: {beta2_decay}")
        if eps[0] is not None and not 0.0 <= eps[0]:
            raise ValueError(f"epsilon1 should be >= 0 but is: {eps[0]}")
        if not 0.0 <= eps[1]:
            raise ValueError(f"epsilon2 should be >= 0 but is: {eps[1]}")
        if not 1.0 <= d:
            raise ValueError(f"Clipping threshold d should be >= 1 but is: {d}")
        if not 0.0 <= weight_decay:
            raise ValueError(f"weight_decay should be >= 0 but is: {weight_decay}")
        defaults = {"lr": lr, "beta2_decay": beta2_decay, "eps": eps, "d": d, "weight_decay": weight_decay,
                    "foreach": foreach, "maximize": maximize}
        super().__init__(params, defaults)

    def _init_state(self, state, param, group):
        if param.dim() > 1:
            state["row_var"] = param.new_zeros(list(param.shape[:-1]) + [1])
            state["col_var"] = param.new_zeros(list(param.shape[:-2]) + [1, param.shape[-1]])
        else:
            state["variance"] = _C._ops.zeros_like(param)

    def step(self, closure=None):
        loss = self._closure_loss(closure)
        with no_grad():
            for group in self.param_groups:
                lr, beta2_decay, d = _to_scalar(group["lr"]), group["beta2_decay"], group["d"]
                eps1, eps2 = group["eps"]
                weight_decay = group["weight_decay"]
                for param, grad in params_with_grad(group):
                    if param.dtype.is_complex:
                        raise RuntimeError("Adafactor does not support complex parameters")
                    state = self._state(param)
                    e1 = finfo(param.dtype).eps if eps1 is None else eps1
                    step_t = state["step"]
                    step_t += 1
                    step = step_t.item()
                    one_minus_beta2_t = step ** beta2_decay
                    rho_t = min(lr, 1 / (step ** 0.5))
                    alpha = max(eps2, param.norm(2).item() / (param.numel() ** 0.5)) * rho_t
                    if weight_decay != 0:
                        param.mul_(1 - lr * weight_decay)
                    if grad.dim() > 1:
                        row_var, col_var = state["row_var"], state["col_var"]
                        row_var.lerp_(grad.norm(dim=-1, keepdim=True).square_().div_(grad.shape[-1]), one_minus_beta2_t)
                        col_var.lerp_(grad.norm(dim=-2, keepdim=True).square_().div_(grad.shape[-2]), one_minus_beta2_t)
                        var_estimate = row_var @ col_var
                        var_estimate.div_(row_var.mean(dim=-2, keepdim=True).clamp_(min=e1))
                    else:
                        variance = state["variance"]
                        variance.lerp_(grad * grad, one_minus_beta2_t)
                        var_estimate = variance.clone()
                    update = var_estimate.clamp_(min=e1 * e1).rsqrt_()
                    update.mul_(grad)
                    denom = max(1.0, update.norm(2).item() / (math.sqrt(update.numel()) * d))
                    param.add_(update, alpha=-alpha / denom)
        return loss
