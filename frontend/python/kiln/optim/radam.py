"""RAdam (torch.optim.RAdam): its single-tensor CPU path, op by op."""
from .. import _C
from .._compiling import is_compiling
from ._common import LazyStateOptimizer, check_betas, check_options, params_with_grad
from .optimizer import _to_scalar, _use_grad_for_differentiable

__all__ = ["RAdam"]


class RAdam(LazyStateOptimizer):
    """Adam whose adaptive step is used only once the variance of its estimate is tractable
    (rho_t > 5), scaled by the rectification term; before that, plain momentum SGD."""

    _BUFFERS = ("exp_avg", "exp_avg_sq")

    def __init__(self, params, lr=1e-3, betas=(0.9, 0.999), eps=1e-8, weight_decay=0,
                 decoupled_weight_decay=False, *, foreach=None, maximize=False, capturable=False,
                 differentiable=False):
        check_options(lr, **{"epsilon value": eps, "weight_decay value": weight_decay})
        check_betas(betas)
        defaults = {"lr": lr, "betas": betas, "eps": eps, "weight_decay": weight_decay, "foreach": foreach,
                    "maximize": maximize, "capturable": capturable, "decoupled_weight_decay": decoupled_weight_decay,
                    "differentiable": differentiable}
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
                traced = is_compiling()
                # Traced, the step's arithmetic in float64 (eager's is in Python floats).
                step = step_t.double() if traced else step_t.item()
                if weight_decay != 0:
                    if group["decoupled_weight_decay"]:
                        param.mul_(1 - lr * weight_decay)
                    else:
                        grad = grad.add(param, alpha=weight_decay)
                exp_avg, exp_avg_sq = state["exp_avg"], state["exp_avg_sq"]
                exp_avg.lerp_(grad, 1 - beta1)
                exp_avg_sq.mul_(beta2).addcmul_(grad, grad, value=1 - beta2)
                bias_correction1 = 1 - beta1 ** step
                bias_correction2 = 1 - beta2 ** step
                bias_corrected_exp_avg = exp_avg / bias_correction1
                rho_inf = 2 / (1 - beta2) - 1
                rho_t = rho_inf - 2 * step * (beta2 ** step) / bias_correction2

                def rect():
                    return ((rho_t - 4) * (rho_t - 2) * rho_inf / ((rho_inf - 4) * (rho_inf - 2) * rho_t)) ** 0.5

                def adaptive_lr():
                    sq = exp_avg_sq.sqrt()
                    sq = sq.add(eps) if group["differentiable"] else sq.add_(eps)
                    return (bias_correction2 ** 0.5) / sq

                if traced:
                    # No branch on the step while tracing: both sides, selected (torch's
                    # capturable branch).
                    update = _C._ops.where(rho_t > 5.0, rect() * adaptive_lr(), 1.0)
                    param.add_(bias_corrected_exp_avg * lr * update, alpha=-1.0)
                elif rho_t > 5.0:
                    param.add_(bias_corrected_exp_avg * lr * adaptive_lr() * rect(), alpha=-1.0)
                else:
                    param.add_(bias_corrected_exp_avg * lr, alpha=-1.0)
        return loss
