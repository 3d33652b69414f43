"""ASGD (torch.optim.ASGD, averaged SGD): its single-tensor CPU path, op by op. The parameter
decays by 1 - lambd * eta and steps by -eta * grad; `ax` averages the iterates from step t0 on;
eta = lr / (1 + lambd * lr * step)^alpha and mu = 1 / max(1, step - t0) follow the step count.
Eagerly eta and mu are read as Python numbers, as torch's non-capturable path does; a compiled
step computes with them as tensors (torch's capturable path)."""
from .. import _C
from .._compiling import is_compiling
from ._common import LazyStateOptimizer, check_options, params_with_grad
from .adam import _scalar_tensor
from .optimizer import _to_scalar, _use_grad_for_differentiable

__all__ = ["ASGD"]


class ASGD(LazyStateOptimizer):
    def __init__(self, params, lr=1e-2, lambd=1e-4, alpha=0.75, t0=1e6, weight_decay=0, foreach=None,
                 maximize=False, differentiable=False, capturable=False):
        check_options(lr, **{"weight_decay value": weight_decay})
        defaults = {"lr": lr, "lambd": lambd, "alpha": alpha, "t0": t0, "weight_decay": weight_decay,
                    "foreach": foreach, "maximize": maximize, "differentiable": differentiable,
                    "capturable": capturable}
        super().__init__(params, defaults)

    def _init_state(self, state, param, group):
        state["eta"] = _scalar_tensor(_to_scalar((group or self._group_of(param))["lr"]))
        state["mu"] = _scalar_tensor(1.0)
        state["ax"] = _C._ops.zeros_like(param)

    @_use_grad_for_differentiable
    def step(self, closure=None):
        loss = self._closure_loss(closure)
        for group in self.param_groups:
            lr, lambd, alpha, t0 = _to_scalar(group["lr"]), group["lambd"], group["alpha"], group["t0"]
            weight_decay = group["weight_decay"]
            for param, grad in params_with_grad(group):
                state = self._state(param, group)
                step_t, eta, mu, ax = state["step"], state["eta"], state["mu"], state["ax"]
                step_t += 1
                if weight_decay != 0:
                    grad = grad.add(param, alpha=weight_decay)
                if is_compiling():
                    param.mul_(1 - lambd * eta)
                    param.addcmul_(grad, eta, value=-1)
                    ax.add_(param.sub(ax).mul_(mu))
                    eta.copy_(lr / ((1 + lambd * lr * step_t) ** alpha))
                    mu.copy_(1 / _C._ops.maximum(step_t - t0, _C._ops.ones_like(step_t)))
                    continue
                eta_value = eta.item()
                param.mul_(1 - lambd * eta_value)
                param.add_(grad, alpha=-eta_value)
                if mu.item() != 1:
                    ax.add_(param.sub(ax).mul_(mu))
                else:
                    ax.copy_(param)
                step = step_t.item()
                eta.fill_(lr / ((1 + lambd * lr * step) ** alpha))
                mu.fill_(1 / max(1, step - t0))
        return loss
