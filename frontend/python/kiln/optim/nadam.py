"""NAdam (torch.optim.NAdam): its single-tensor CPU path, op by op."""
from .._compiling import is_compiling
from .._tensor import Tensor
from ._common import LazyStateOptimizer, check_betas, check_options, params_with_grad
from .optimizer import _to_scalar, _use_grad_for_differentiable

__all__ = ["NAdam"]


class NAdam(LazyStateOptimizer):
    """Adam with Nesterov momentum and the momentum schedule mu_t = beta1 (1 - 0.5 * 0.96^(t *
    momentum_decay)); mu_product (a 0-d state tensor) is their running product."""

    _BUFFERS = ("exp_avg", "exp_avg_sq")
    _SCALARS = {"mu_product": 1.0}

    def __init__(self, params, lr=2e-3, betas=(0.9, 0.999), eps=1e-8, weight_decay=0, momentum_decay=4e-3,
                 decoupled_weight_decay=False, *, foreach=None, maximize=False, capturable=False,
                 differentiable=False):
        check_options(lr, **{"epsilon value": eps, "weight_decay value": weight_decay,
                             "momentum_decay value": momentum_decay})
        check_betas(betas)
        defaults = {"lr": lr, "betas": betas, "eps": eps, "weight_decay": weight_decay,
                    "momentum_decay": momentum_decay, "decoupled_weight_decay": decoupled_weight_decay,
                    "maximize": maximize, "foreach": foreach, "capturable": capturable,
                    "differentiable": differentiable}
        super().__init__(params, defaults)

    @_use_grad_for_differentiable
    def step(self, closure=None):
        loss = self._closure_loss(closure)
        for group in self.param_groups:
            lr, (beta1, beta2) = _to_scalar(group["lr"]), group["betas"]
            eps, weight_decay, momentum_decay = group["eps"], group["weight_decay"], group["momentum_decay"]
            for param, grad in params_with_grad(group):
                state = self._state(param)
                step_t, mu_product = state["step"], state["mu_product"]
                step_t += 1
                traced = is_compiling() or group["differentiable"]
                # Traced by kiln.compile, the step's arithmetic in float64, as eager's in Python
                # floats (torch's differentiable step keeps the float32 step tensor).
                step = step_t.double() if is_compiling() and not group["differentiable"] else \
                    step_t if traced else step_t.item()
                bias_correction2 = 1 - beta2 ** step
                if weight_decay != 0:
                    if group["decoupled_weight_decay"]:
                        param.mul_(1 - lr * weight_decay)
                    else:
                        grad = grad.add(param, alpha=weight_decay)
                mu = beta1 * (1.0 - 0.5 * (0.96 ** (step * momentum_decay)))
                mu_next = beta1 * (1.0 - 0.5 * (0.96 ** ((step + 1) * momentum_decay)))
                # (a traced mu is a float64 tensor: rounded to mu_product's dtype first, as eager
                # multiplies by the Python float in mu_product's dtype)
                mu_product *= mu.to(mu_product.dtype) if isinstance(mu, Tensor) else mu
                exp_avg, exp_avg_sq = state["exp_avg"], state["exp_avg_sq"]
                exp_avg.lerp_(grad, 1 - beta1)
                exp_avg_sq.mul_(beta2).addcmul_(grad, grad, value=1 - beta2)
                denom = exp_avg_sq.div(bias_correction2).sqrt()
                if traced:
                    # Tensor coefficients (torch's capturable/differentiable branch).
                    denom = denom.add(eps)
                    product = mu_product.to(step.dtype)
                    param.addcdiv_(grad * (-lr * (1.0 - mu) / (1.0 - product)), denom)
                    param.addcdiv_(exp_avg * (-lr * mu_next / (1.0 - product * mu_next)), denom)
                else:
                    product = mu_product.item()
                    denom.add_(eps)
                    param.addcdiv_(grad, denom, value=-lr * (1.0 - mu) / (1.0 - product))
                    param.addcdiv_(exp_avg, denom, value=(-lr * mu_next) / (1.0 - product * mu_next))
        return loss
