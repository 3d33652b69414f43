"""Pieces the optimizers added after Adam share: argument checks and lazily made state."""
from .. import _C
from .._tensor import Tensor
from .adam import _scalar_tensor


def check_options(lr, **values):
    """ValueError for a negative option, worded as torch's ("Invalid epsilon value: -1")."""
    if isinstance(lr, Tensor) and lr.numel() != 1:
        raise ValueError("Tensor lr must be 1-element")
    if not 0.0 <= lr:
        raise ValueError(f"Invalid learning rate: {lr}")
    for name, value in values.items():
        if not 0.0 <= value:
            raise ValueError(f"Invalid {name}: {value}")


def check_betas(betas):
    for i in (0, 1):
        if not 0.0 <= betas[i] < 1.0:
            raise ValueError(f"Invalid beta parameter at index {i}: {betas[i]}")


def lazy_state(optimizer, param, *buffers, **scalars):
    """The parameter's state, made on first use as torch's _init_group makes it: a float32 0-d
    `step`, zero buffers like the parameter, and 0-d float32 scalars."""
    state = optimizer.state[param]
    if len(state) == 0:
        state["step"] = _scalar_tensor(0.0)
        for name, value in scalars.items():
            state[name] = _scalar_tensor(value)
        for name in buffers:
            state[name] = _C._ops.zeros_like(param)
    return state


def params_with_grad(optimizer, group):
    for param in group["params"]:
        grad = getattr(param, "grad", None)
        if grad is not None:
            yield param, (-grad if group["maximize"] else grad)
