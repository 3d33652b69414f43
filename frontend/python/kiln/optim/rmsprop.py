"""RMSprop (torch.optim.RMSprop): its single-tensor CPU path, op by op."""
from .. import _C
from .._tensor import Tensor
from .adam import _scalar_tensor
from .optimizer import Optimizer, _to_scalar, _use_grad_for_differentiable

__all__ = ["RMSprop"]


class RMSprop(Optimizer):
    """square_avg = alpha * square_avg + (1 - alpha) * g^2; avg = sqrt(square_avg) (centered: minus
    the squared running mean of g) + eps; param -= lr * g / avg, or through a momentum buffer
    buf = momentum * buf + g / avg. Each op as torch's, so the numbers are torch's."""

    def __init__(self, params, lr=1e-2, alpha=0.99, eps=1e-8, weight_decay=0, momentum=0, centered=False,
                 capturable=False, foreach=None, maximize=False, differentiable=False):
        if isinstance(lr, Tensor) and lr.numel() != 1:
            raise ValueError("Tensor lr must be 1-element")
        for name, value in (("learning rate", lr), ("epsilon value", eps), ("momentum value", momentum),
                            ("weight_decay value", weight_decay), ("alpha value", alpha)):
            if not 0.0 <= value:
                raise ValueError(f"Invalid {name}: {value}")
        defaults = {"lr": lr, "momentum": momentum, "alpha": alpha, "eps": eps, "centered": centered,
                    "weight_decay": weight_decay, "capturable": capturable, "foreach": foreach,
                    "maximize": maximize, "differentiable": differentiable}
        super().__init__(params, defaults)

    def __setstate__(self, state):
        super().__setstate__(state)
        for group in self.param_groups:
            for key, value in (("momentum", 0), ("centered", False), ("foreach", None), ("maximize", False),
                               ("differentiable", False), ("capturable", False)):
                group.setdefault(key, value)

    def _init_state(self, param, group):
        state = self.state[param]
        if len(state) == 0:
            state["step"] = _scalar_tensor(0.0)
            state["square_avg"] = _C._ops.zeros_like(param)
            if group["momentum"] > 0:
                state["momentum_buffer"] = _C._ops.zeros_like(param)
            if group["centered"]:
                state["grad_avg"] = _C._ops.zeros_like(param)
        return state

    def _prepare_capture(self):
        for group in self.param_groups:
            for param in group["params"]:
                if getattr(param, "grad", None) is not None:
                    self._init_state(param, group)

    @_use_grad_for_differentiable
    def step(self, closure=None):
        """Performs a single optimization step; `closure` re-evaluates the model and returns
        the loss."""
        loss = self._closure_loss(closure)
        for group in self.param_groups:
            if group["capturable"]:
                raise AssertionError("If capturable=True, params and state_steps must be on supported devices: "
                                     "['cuda', 'xla', 'xpu']; kiln's tensors are on cpu")
            lr, alpha, eps = _to_scalar(group["lr"]), group["alpha"], group["eps"]
            weight_decay, momentum = group["weight_decay"], group["momentum"]
            for param in group["params"]:
                grad = getattr(param, "grad", None)
                if grad is None:
                    continue
                state = self._init_state(param, group)
                grad = -grad if group["maximize"] else grad
                state["step"] += 1
                if weight_decay != 0:
                    grad = grad.add(param, alpha=weight_decay)
                square_avg = state["square_avg"]
                square_avg.mul_(alpha).addcmul_(grad, grad, value=1 - alpha)
                if group["centered"]:
                    grad_avg = state["grad_avg"]
                    grad_avg.lerp_(grad, 1 - alpha)
                    avg = square_avg.addcmul(grad_avg, grad_avg, value=-1).sqrt_()
                else:
                    avg = square_avg.sqrt()
                avg = avg.add(eps) if group["differentiable"] else avg.add_(eps)
                if momentum > 0:
                    buf = state["momentum_buffer"]
                    buf.mul_(momentum).addcdiv_(grad, avg)
                    param.add_(buf, alpha=-lr)
                else:
                    param.addcdiv_(grad, avg, value=-lr)
        return loss
