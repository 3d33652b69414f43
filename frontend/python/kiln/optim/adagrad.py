"""Adagrad (torch.optim.Adagrad): its single-tensor CPU path, op by op."""
from .. import _C
from .._compiling import is_compiling
from .._tensor import Tensor
from .adam import _scalar_tensor
from .optimizer import Optimizer, _to_scalar, _use_grad_for_differentiable

__all__ = ["Adagrad"]


class Adagrad(Optimizer):
    """sum += g^2; param -= clr * g / (sqrt(sum) + eps) with clr = lr / (1 + (step - 1) * lr_decay).
    The state (step, sum) is made at construction, as torch's."""

    def __init__(self, params, lr=1e-2, lr_decay=0, weight_decay=0, initial_accumulator_value=0, eps=1e-10,
                 foreach=None, *, maximize=False, differentiable=False, fused=None):
        if isinstance(lr, Tensor) and lr.numel() != 1:
            raise ValueError("Tensor lr must be 1-element")
        for name, value in (("learning rate", lr), ("lr_decay value", lr_decay), ("weight_decay value", weight_decay),
                            ("initial_accumulator_value value", initial_accumulator_value),
                            ("epsilon value", eps)):
            if not 0.0 <= value:
                raise ValueError(f"Invalid {name}: {value}")
        if fused:
            raise NotImplementedError("Adagrad: fused=True (torch's fused kernel) is not supported by kiln")
        defaults = {"lr": lr, "lr_decay": lr_decay, "eps": eps, "weight_decay": weight_decay,
                    "initial_accumulator_value": initial_accumulator_value, "foreach": foreach,
                    "maximize": maximize, "differentiable": differentiable, "fused": fused}
        super().__init__(params, defaults)
        for group in self.param_groups:
            for param in group["params"]:
                state = self.state[param]
                state["step"] = _scalar_tensor(0.0)
                state["sum"] = _C._ops.full_like(param, initial_accumulator_value)

    def __setstate__(self, state):
        super().__setstate__(state)
        for group in self.param_groups:
            for key, value in (("foreach", None), ("maximize", False), ("differentiable", False), ("fused", None)):
                group.setdefault(key, value)

    @_use_grad_for_differentiable
    def step(self, closure=None):
        """Performs a single optimization step; `closure` re-evaluates the model and returns
        the loss."""
        loss = self._closure_loss(closure)
        for group in self.param_groups:
            lr, lr_decay = _to_scalar(group["lr"]), group["lr_decay"]
            weight_decay, eps = group["weight_decay"], group["eps"]
            for param in group["params"]:
                grad = getattr(param, "grad", None)
                if grad is None:
                    continue
                state = self.state[param]
                step_t = state["step"]
                step_t += 1
                grad = -grad if group["maximize"] else grad
                if weight_decay != 0:
                    grad = grad.add(param, alpha=weight_decay)
                state_sum = state["sum"]
                state_sum.addcmul_(grad, grad, value=1)
                std = state_sum.sqrt() + eps if group["differentiable"] else state_sum.sqrt().add_(eps)
                if lr_decay == 0:
                    param.addcdiv_(grad, std, value=-lr)
                elif is_compiling():
                    # Traced: the decayed lr from the step tensor (no .item(), which would break).
                    clr = lr / (1 + (step_t - 1) * lr_decay)
                    param.sub_(grad / std * clr)
                else:
                    param.addcdiv_(grad, std, value=-(lr / (1 + (step_t.item() - 1) * lr_decay)))
        return loss
