"""Pieces the optimizers added after Adam share: argument checks and lazily made state."""
from .. import _C
from .._tensor import Tensor
from .adam import _scalar_tensor
from .optimizer import Optimizer


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


class LazyStateOptimizer(Optimizer):
    """An optimizer whose per-parameter state is made on first use, as torch's _init_group makes
    it: a float32 0-d `step`, the zero buffers named in _BUFFERS (like the parameter) and the 0-d
    float32 scalars in _SCALARS. A compiled step makes it before tracing (_prepare_capture)."""

    _BUFFERS = ()
    _SCALARS = {}

    def _state(self, param, group=None):
        state = self.state[param]
        if len(state) == 0:
            state["step"] = _scalar_tensor(0.0)
            for name, value in self._SCALARS.items():
                state[name] = _scalar_tensor(value)
            for name in self._BUFFERS:
                state[name] = _C._ops.zeros_like(param)
            self._init_state(state, param, group)
        return state

    def _init_state(self, state, param, group):
        """The state a subclass makes besides step, _SCALARS and _BUFFERS (from the group's
        options: `group` is None when the caller did not have it at hand, see _group_of)."""

    def _group_of(self, param):
        return next(g for g in self.param_groups if any(p is param for p in g["params"]))

    def _prepare_capture(self):
        for group in self.param_groups:
            for param, _ in params_with_grad(group):
                self._state(param)


def params_with_grad(group):
    for param in group["params"]:
        grad = getattr(param, "grad", None)
        if grad is not None:
            yield param, (-grad if group["maximize"] else grad)
