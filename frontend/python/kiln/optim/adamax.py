"""Adamax (torch.optim.Adamax): its single-tensor CPU path, op by op."""
from .. import _C
from .._compiling import is_compiling
from ._common import LazyStateOptimizer, check_betas, check_options, params_with_grad
from .optimizer import _to_scalar, _use_grad_for_differentiable

__all__ = ["Adamax"]


class Adamax(LazyStateOptimizer):
    """exp_avg = lerp(exp_avg, g, 1 - beta1); exp_inf = max(beta2 * exp_inf, |g| + eps);
    param -= lr / (1 - beta1^step) * exp_avg / exp_inf."""

    _BUFFERS = ("exp_avg", "exp_inf")

    def __init__(self, params, lr=2e-3, betas=(0.9, 0.999), eps=1e-8, weight_decay=0, foreach=None, *,
                 maximize=False, differentiable=False, capturable=False):
        check_options(lr, **{"epsilon value": eps, "weight_decay value": weight_decay})
        check_betas(betas)
        defaults = {"lr": lr, "betas": betas, "eps": eps, "weight_decay": weight_decay, "foreach": foreach,
                    "maximize": maximize, "differentiable": differentiable, "capturable": capturable}
        super().__init__(params, defaults)

    @_use_grad_for_differentiable
    def step(self, closure=None):
        loss = self._closure_loss(closure)
        for group in self.param_groups:
            lr, (beta1, beta2) = _to_scalar(group["lr"]), group["betas"]
            eps, weight_decay = group["eps"], group["weight_decay"]
            for param, grad in params_with_grad(group):
                state = self._state(param)
                step_t = state["step"]
                step_t += 1
                if weight_decay != 0:
                    grad = grad.add(param, alpha=weight_decay)
                exp_avg, exp_inf = state["exp_avg"], state["exp_inf"]
                exp_avg.lerp_(grad, 1 - beta1)
                exp_inf.copy_(_C._ops.maximum(exp_inf.mul_(beta2), grad.abs().add_(eps)))
                if is_compiling():
                    # Traced: the bias correction from the step tensor (no .item()).
                    # (in float64, as eager's Python-float arithmetic)
                    param.sub_(exp_avg / exp_inf * (lr / (1 - beta1 ** step_t.double())))
                else:
                    param.addcdiv_(exp_avg, exp_inf, value=-lr / (1 - beta1 ** step_t.item()))
        return loss
