"""Adadelta (torch.optim.Adadelta): its single-tensor CPU path, op by op."""
from ._common import LazyStateOptimizer, check_options, params_with_grad
from .optimizer import _to_scalar, _use_grad_for_differentiable

__all__ = ["Adadelta"]


class Adadelta(LazyStateOptimizer):
    """square_avg = rho * square_avg + (1 - rho) g^2; delta = sqrt(acc_delta + eps) /
    sqrt(square_avg + eps) * g; acc_delta = rho * acc_delta + (1 - rho) delta^2; param -= lr * delta."""

    _BUFFERS = ("square_avg", "acc_delta")

    def __init__(self, params, lr=1.0, rho=0.9, eps=1e-6, weight_decay=0, foreach=None, *, capturable=False,
                 maximize=False, differentiable=False):
        check_options(lr, **{"epsilon value": eps, "weight_decay value": weight_decay})
        if not 0.0 <= rho <= 1.0:
            raise ValueError(f"Invalid rho value: {rho}")
        defaults = {"lr": lr, "rho": rho, "eps": eps, "weight_decay": weight_decay, "maximize": maximize,
                    "capturable": capturable, "foreach": foreach, "differentiable": differentiable}
        super().__init__(params, defaults)

    @_use_grad_for_differentiable
    def step(self, closure=None):
        loss = self._closure_loss(closure)
        for group in self.param_groups:
            lr, rho, eps, weight_decay = _to_scalar(group["lr"]), group["rho"], group["eps"], group["weight_decay"]
            for param, grad in params_with_grad(group):
                state = self._state(param)
                state["step"] += 1
                if weight_decay != 0:
                    grad = grad.add(param, alpha=weight_decay)
                square_avg, acc_delta = state["square_avg"], state["acc_delta"]
                square_avg.mul_(rho).addcmul_(grad, grad, value=1 - rho)
                std = square_avg.add(eps).sqrt_()
                delta = acc_delta.add(eps).sqrt_()
                if group["differentiable"]:
                    delta = delta.clone()
                delta.div_(std).mul_(grad)
                acc_delta.mul_(rho).addcmul_(delta, delta, value=1 - rho)
                param.add_(delta, alpha=-lr)
        return loss
