"""SGD with momentum, dampening, Nesterov momentum and weight decay (torch.optim.SGD)."""
from .. import _C
from .._compiling import is_compiling
from .._tensor import Tensor
from .optimizer import Optimizer, _to_scalar, _use_grad_for_differentiable

__all__ = ["SGD"]


class SGD(Optimizer):
    """Stochastic gradient descent, as torch.optim.SGD computes it (its single-tensor CPU path):

        g = grad (negated when maximize) [+ weight_decay * param]
        buf = g on the first step, else momentum * buf + (1 - dampening) * g
        g = g + momentum * buf (nesterov) or buf (momentum != 0)
        param -= lr * g

    By default (fused=None or True) each parameter and its momentum buffer are updated by one
    `_fused_sgd_` kernel that rounds every step as the ops above do, so the results are those of
    torch's default CPU path bit for bit; fused=False (or a tensor lr) runs the ops one by one,
    as kiln.compile traces them. `foreach` is accepted for compatibility.
    """

    def __init__(self, params, lr=1e-3, momentum=0, dampening=0, weight_decay=0, nesterov=False,
                 *, maximize=False, foreach=None, differentiable=False, fused=None):
        if isinstance(lr, Tensor) and lr.numel() != 1:
            raise ValueError("Tensor lr must be 1-element")
        if lr < 0.0:
            raise ValueError(f"Invalid learning rate: {lr}")
        if momentum < 0.0:
            raise ValueError(f"Invalid momentum value: {momentum}")
        if weight_decay < 0.0:
            raise ValueError(f"Invalid weight_decay value: {weight_decay}")
        defaults = {"lr": lr, "momentum": momentum, "dampening": dampening,
                    "weight_decay": weight_decay, "nesterov": nesterov, "maximize": maximize,
                    "foreach": foreach, "differentiable": differentiable, "fused": fused}
        if nesterov and (momentum <= 0 or dampening != 0):
            raise ValueError("Nesterov momentum requires a momentum and zero dampening")
        super().__init__(params, defaults)
        self._check_fused(fused, differentiable, foreach)

    def __setstate__(self, state):
        super().__setstate__(state)
        for group in self.param_groups:
            group.setdefault("nesterov", False)
            group.setdefault("maximize", False)
            group.setdefault("foreach", None)
            group.setdefault("differentiable", False)
            group.setdefault("fused", False)

    @_use_grad_for_differentiable
    def step(self, closure=None):
        """Performs a single optimization step; `closure` re-evaluates the model and returns
        the loss."""
        loss = self._closure_loss(closure)
        for group in self.param_groups:
            # Traced by kiln.compile, differentiable, fused=False or a tensor hyperparameter: op by
            # op (the compiler fuses the traced ops itself); else one _fused_sgd_ per parameter.
            if (group["fused"] is False or group["differentiable"] or is_compiling()
                    or any(isinstance(group[k], Tensor) for k in ("lr", "weight_decay", "momentum", "dampening"))):
                self._step_group_ops(group)
            else:
                self._step_group_fused(group)
        return loss

    def _step_group_fused(self, group):
        # One pass over each parameter and its momentum buffer: _step_group_ops's arithmetic,
        # each op rounded as there (so the results are torch's single-tensor step's, bit for bit).
        momentum, dampening = group["momentum"], group["dampening"]
        lr, weight_decay = _to_scalar(group["lr"]), group["weight_decay"]
        nesterov, maximize = group["nesterov"], group["maximize"]
        fused_sgd = _C._ops._fused_sgd_
        for param in group["params"]:
            grad = getattr(param, "grad", None)
            if grad is None:
                continue
            buf, first = None, False
            if momentum != 0:
                state = self.state[param]
                buf = state.get("momentum_buffer")
                if buf is None:
                    buf = state["momentum_buffer"] = _C._ops.empty_like(grad)
                    first = True
            fused_sgd(param, grad, buf, lr=lr, momentum=momentum, dampening=dampening,
                      weight_decay=weight_decay, nesterov=nesterov, maximize=maximize,
                      first_step=first)

    def _step_group_ops(self, group):
        # torch's single-tensor step, op by op.
        momentum = group["momentum"]
        uses_momentum = momentum != 0
        weight_decay = group["weight_decay"]
        dampening = group["dampening"]
        nesterov = group["nesterov"]
        maximize = group["maximize"]
        lr = group["lr"]
        # A tensor lr that requires grad, or one kiln.compile made of a float that changes
        # between steps (traced: no .item()), multiplies the update as a tensor.
        tensor_lr = isinstance(lr, Tensor) and (lr.requires_grad or is_compiling())
        if not tensor_lr:
            lr = _to_scalar(lr)
        state = self.state
        for param in group["params"]:
            grad = getattr(param, "grad", None)
            if grad is None:
                continue
            if maximize:
                grad = -grad
            if weight_decay != 0:
                if isinstance(weight_decay, Tensor) and weight_decay.requires_grad:
                    grad = grad.addcmul_(param.clone(), weight_decay)
                else:
                    grad = grad.add(param, alpha=_to_scalar(weight_decay))
            if uses_momentum:
                param_state = state[param]
                buf = param_state.get("momentum_buffer")
                if buf is None:
                    buf = grad.detach().clone()
                else:
                    buf.mul_(momentum).add_(grad, alpha=1 - dampening)
                param_state["momentum_buffer"] = buf
                grad = grad.add(buf, alpha=momentum) if nesterov else buf
            if tensor_lr:
                param.addcmul_(grad, lr, value=-1)
            else:
                param.add_(grad, alpha=-lr)
