"""Rprop (torch.optim.Rprop): its single-tensor CPU path, op by op. Per element, the step size
grows by etaplus while the gradient keeps its sign, shrinks by etaminus when it flips (and that
element skips its update), clamped to step_sizes; the parameter moves by -sign(grad) * step_size."""
from .. import _C
from ._common import LazyStateOptimizer, params_with_grad
from .optimizer import _to_scalar, _use_grad_for_differentiable

__all__ = ["Rprop"]


class Rprop(LazyStateOptimizer):
    def __init__(self, params, lr=1e-2, etas=(0.5, 1.2), step_sizes=(1e-6, 50), *, capturable=False,
                 foreach=None, maximize=False, differentiable=False):
        if hasattr(lr, "numel") and lr.numel() != 1:
            raise ValueError("Tensor lr must be 1-element")
        if not 0.0 <= lr:
            raise ValueError(f"Invalid learning rate: {lr}")
        if not 0.0 < etas[0] < 1.0 < etas[1]:
            raise ValueError(f"Invalid eta values: {etas[0]}, {etas[1]}")
        defaults = {"lr": lr, "etas": etas, "step_sizes": step_sizes, "foreach": foreach, "maximize": maximize,
                    "differentiable": differentiable, "capturable": capturable}
        super().__init__(params, defaults)

    def _init_state(self, state, param, group):
        state["prev"] = _C._ops.zeros_like(param)
        state["step_size"] = _C._ops.full_like(param, _to_scalar((group or self._group_of(param))["lr"]))

    @_use_grad_for_differentiable
    def step(self, closure=None):
        loss = self._closure_loss(closure)
        for group in self.param_groups:
            etaminus, etaplus = group["etas"]
            step_size_min, step_size_max = group["step_sizes"]
            for param, grad in params_with_grad(group):
                state = self._state(param, group)
                state["step"] += 1
                prev, step_size = state["prev"], state["step_size"]
                sign = grad.mul(prev).sign()
                sign = _C._ops.where(sign.gt(0), _C._ops.full_like(sign, etaplus),
                                     _C._ops.where(sign.lt(0), _C._ops.full_like(sign, etaminus),
                                                   _C._ops.ones_like(sign)))
                step_size.mul_(sign).clamp_(step_size_min, step_size_max)
                grad = _C._ops.where(sign.eq(etaminus), _C._ops.zeros_like(grad), grad)
                param.addcmul_(grad.sign(), step_size, value=-1)
                prev.copy_(grad)
        return loss
