"""Adam (and, with decoupled_weight_decay, AdamW): torch.optim.Adam's update, op for op."""
from .._compiling import is_compiling
from .. import _C
from .._tensor import Tensor
from .optimizer import Optimizer, _to_scalar, _use_grad_for_differentiable

__all__ = ["Adam"]


def _scalar_tensor(value):
    return _C._ops.full([], value, dtype=_C.float32)


class Adam(Optimizer):
    """Adam, computed as torch.optim.Adam's single-tensor path computes it (the path torch takes
    on the CPU), so that results agree to float32 rounding:

        step += 1                          (a float32 0-d tensor in state["step"])
        param *= 1 - lr * weight_decay     (decoupled_weight_decay) or grad += weight_decay * param
        exp_avg.lerp_(grad, 1 - beta1)
        exp_avg_sq.mul_(beta2).addcmul_(grad, grad, value=1 - beta2)
        denom = (exp_avg_sq.sqrt() / sqrt(1 - beta2 ** step)).add_(eps)   (max_exp_avg_sq: amsgrad)
        param.addcdiv_(exp_avg, denom, value=-lr / (1 - beta1 ** step))

    By default (fused=None or True) each parameter is updated by one `_fused_adam_` kernel
    that rounds every step as the ops above do; fused=False runs the ops one by one (same
    results). `foreach` is accepted for compatibility and changes nothing. `capturable` (CUDA
    graphs) needs a CUDA device: step() raises AssertionError, as torch does for cpu tensors.
    """

    def __init__(self, params, lr=1e-3, betas=(0.9, 0.999), eps=1e-8, weight_decay=0,
                 amsgrad=False, *, foreach=None, maximize=False, capturable=False,
                 differentiable=False, fused=None, decoupled_weight_decay=False):
        if isinstance(lr, Tensor):
            if foreach and not capturable:
                raise ValueError("lr as a Tensor is not supported for capturable=False and foreach=True")
            if lr.numel() != 1:
                raise ValueError("Tensor lr must be 1-element")
        if not 0.0 <= lr:
            raise ValueError(f"Invalid learning rate: {lr}")
        if not 0.0 <= eps:
            raise ValueError(f"Invalid epsilon value: {eps}")
        if not 0.0 <= betas[0] < 1.0:
            raise ValueError(f"Invalid beta parameter at index 0: {betas[0]}")
        if not 0.0 <= betas[1] < 1.0:
            raise ValueError(f"Invalid beta parameter at index 1: {betas[1]}")
        if not 0.0 <= weight_decay:
            raise ValueError(f"Invalid weight_decay value: {weight_decay}")
        if not ((isinstance(betas[0], float) and isinstance(betas[1], float))
                or (isinstance(betas[0], Tensor) and isinstance(betas[1], Tensor))):
            raise ValueError("betas must be either both floats or both Tensors")
        for i in (0, 1):
            if isinstance(betas[i], Tensor):
                if not capturable and foreach:
                    raise ValueError(f"betas[{i}] as a Tensor is not supported for capturable=False "
                                     "and foreach=True")
                if betas[i].numel() != 1:
                    raise ValueError(f"Tensor betas[{i}] must be 1-element")
        betas = tuple(_to_scalar(b) for b in betas)
        defaults = {"lr": lr, "betas": betas, "eps": eps, "weight_decay": weight_decay,
                    "amsgrad": amsgrad, "maximize": maximize, "foreach": foreach,
                    "capturable": capturable, "differentiable": differentiable, "fused": fused,
                    "decoupled_weight_decay": decoupled_weight_decay}
        super().__init__(params, defaults)
        self._check_fused(fused, differentiable, foreach)

    def __setstate__(self, state):
        super().__setstate__(state)
        for group in self.param_groups:
            group.setdefault("amsgrad", False)
            group.setdefault("maximize", False)
            group.setdefault("foreach", None)
            group.setdefault("capturable", False)
            group.setdefault("differentiable", False)
            group.setdefault("decoupled_weight_decay", False)
            group.setdefault("fused", None)
            for p in group["params"]:
                p_state = self.state.get(p, [])
                if len(p_state) != 0 and not isinstance(p_state["step"], Tensor):
                    p_state["step"] = _scalar_tensor(float(p_state["step"]))

    def _init_state(self, param, amsgrad):
        state = self.state[param]
        if len(state) == 0:
            state["step"] = _scalar_tensor(0.0)
            state["exp_avg"] = _C._ops.zeros_like(param)
            state["exp_avg_sq"] = _C._ops.zeros_like(param)
            if amsgrad:
                state["max_exp_avg_sq"] = _C._ops.zeros_like(param)
        return state

    def _prepare_capture(self):
        for group in self.param_groups:
            for param in group["params"]:
                if getattr(param, "grad", None) is not None:
                    self._init_state(param, group["amsgrad"])

    @_use_grad_for_differentiable
    def step(self, closure=None):
        """Performs a single optimization step; `closure` re-evaluates the model and returns
        the loss."""
        loss = self._closure_loss(closure)
        for group in self.param_groups:
            if group["capturable"]:
                # torch's check: a capturable step needs params and steps on a CUDA-graph device.
                raise AssertionError("If capturable=True, params and state_steps must be on "
                                     "supported devices: ['cuda', 'xla', 'xpu']; kiln's tensors "
                                     "are on cpu")
            if group["differentiable"] or is_compiling():
                # Traced by kiln.compile: the bias corrections as tensor ops from the step tensor
                # (torch's capturable formulation), with no .item() and no _fused_adam_ (which has
                # no functional form), so the step compiles into fused kernels.
                self._step_group_differentiable(group)
            elif group["fused"] is False or isinstance(group["lr"], Tensor):
                self._step_group_ops(group)
            else:
                self._step_group_fused(group)
        return loss

    def _step_group_fused(self, group):
        # One _fused_adam_ call per parameter: the same arithmetic as _step_group_ops, in one
        # pass over the parameter and its state.
        beta1, beta2 = (_to_scalar(b) for b in group["betas"])
        lr, weight_decay, eps = group["lr"], group["weight_decay"], group["eps"]
        amsgrad, maximize = group["amsgrad"], group["maximize"]
        decoupled = group["decoupled_weight_decay"]
        fused_adam = _C._ops._fused_adam_
        for param in group["params"]:
            grad = getattr(param, "grad", None)
            if grad is None:
                continue
            state = self._init_state(param, amsgrad)
            fused_adam(param, grad, state["exp_avg"], state["exp_avg_sq"],
                       state["max_exp_avg_sq"] if amsgrad else None, state["step"], lr=lr,
                       beta1=beta1, beta2=beta2, weight_decay=weight_decay, eps=eps,
                       maximize=maximize, decoupled_weight_decay=decoupled)

    def _step_group_ops(self, group):
        # torch's single-tensor step op for op (fused=False, or a tensor lr).
        beta1, beta2 = (_to_scalar(b) for b in group["betas"])
        lr = group["lr"]
        weight_decay = group["weight_decay"]
        eps = group["eps"]
        amsgrad = group["amsgrad"]
        maximize = group["maximize"]
        decoupled = group["decoupled_weight_decay"]
        for param in group["params"]:
            grad = getattr(param, "grad", None)
            if grad is None:
                continue
            state = self._init_state(param, amsgrad)
            if maximize:
                grad = -grad
            step_t = state["step"]
            step_t += 1
            if weight_decay != 0:
                if decoupled:
                    param.mul_(1 - lr * weight_decay)
                else:
                    grad = grad.add(param, alpha=weight_decay)
            exp_avg = state["exp_avg"]
            exp_avg_sq = state["exp_avg_sq"]
            exp_avg.lerp_(grad, 1 - beta1)
            exp_avg_sq.mul_(beta2).addcmul_(grad, grad, value=1 - beta2)

            step = step_t.item()
            bias_correction1 = 1 - beta1 ** step
            bias_correction2 = 1 - beta2 ** step
            step_size = lr / bias_correction1
            if isinstance(step_size, Tensor):
                step_size = step_size.item()
            bias_correction2_sqrt = bias_correction2 ** 0.5
            if amsgrad:
                max_exp_avg_sq = state["max_exp_avg_sq"]
                max_exp_avg_sq.copy_(_C._ops.maximum(max_exp_avg_sq, exp_avg_sq))
                denom = (max_exp_avg_sq.sqrt() / bias_correction2_sqrt).add_(eps)
            else:
                denom = (exp_avg_sq.sqrt() / bias_correction2_sqrt).add_(eps)
            param.addcdiv_(exp_avg, denom, value=-step_size)

    def _step_group_differentiable(self, group):
        # torch's differentiable path: the same update with the bias corrections computed as
        # tensors from the step tensor, and inputs cloned where autograd needs their old value.
        beta1, beta2 = (_to_scalar(b) for b in group["betas"])
        lr = group["lr"]
        weight_decay = group["weight_decay"]
        eps = group["eps"]
        amsgrad = group["amsgrad"]
        for param in group["params"]:
            grad = getattr(param, "grad", None)
            if grad is None:
                continue
            state = self._init_state(param, amsgrad)
            if getattr(state["step"], "requires_grad", False):
                raise RuntimeError("`requires_grad` is not supported for `step` in differentiable mode")
            if group["maximize"]:
                grad = -grad
            step_t = state["step"]
            step_t += 1
            if weight_decay != 0:
                if group["decoupled_weight_decay"]:
                    param.mul_(1 - lr * weight_decay)
                else:
                    grad = grad.add(param, alpha=weight_decay)
            exp_avg = state["exp_avg"]
            exp_avg_sq = state["exp_avg_sq"]
            exp_avg.lerp_(grad, 1 - beta1)
            exp_avg_sq.mul_(beta2).addcmul_(grad, grad, value=1 - beta2)
            # Compiled, the bias corrections are computed in float64, as the eager step computes
            # them in Python floats (the float32 step count is exact): a float64 model's step
            # equals eager's. (torch's differentiable step computes them in float32, as here.)
            step = step_t.double() if is_compiling() and not group["differentiable"] else step_t
            bias_correction1 = 1 - beta1 ** step
            bias_correction2 = 1 - beta2 ** step
            step_size_neg = (lr / bias_correction1).neg()
            bias_correction2_sqrt = bias_correction2.sqrt()
            if amsgrad:
                max_exp_avg_sq = state["max_exp_avg_sq"]
                state["max_exp_avg_sq"].copy_(_C._ops.maximum(max_exp_avg_sq.clone(), exp_avg_sq))
                second = state["max_exp_avg_sq"]
            else:
                second = exp_avg_sq
            denom = (second.sqrt() / (bias_correction2_sqrt * step_size_neg)).add_(eps / step_size_neg)
            param.addcdiv_(exp_avg.clone(), denom)
