"""Optimizer: the base class of kiln.optim's optimizers, with torch.optim.Optimizer's API.

An optimizer holds `param_groups` (dicts with "params" and the options, defaults filled in)
and `state` (per-parameter dicts keyed by the parameter). `state_dict()` has torch's layout:
{"state": {param index: {...}}, "param_groups": [{..., "params": [indices]}]}, so a state dict
saved by torch.optim loads here and the other way round (through kiln.save / kiln.load).
"""
import functools
import itertools
import warnings
from collections import OrderedDict, defaultdict
from collections.abc import Iterable

from .. import _C, _compiling
from .._tensor import Tensor
from ..autograd import enable_grad

__all__ = ["Optimizer", "required"]


class _RequiredParameter:
    """Marks an option with no default: every param group must give it."""

    def __repr__(self):
        return "<required parameter>"


required = _RequiredParameter()


class _RemovableHandle:
    """Returned by the register_* methods: `remove()` unregisters the hook."""

    _next_id = 0

    def __init__(self, hooks_dict):
        self._hooks = hooks_dict
        self.id = _RemovableHandle._next_id
        _RemovableHandle._next_id += 1

    def remove(self):
        self._hooks.pop(self.id, None)

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        self.remove()


def _use_grad_for_differentiable(step):
    """Runs `step` with grad mode set to the optimizer's `differentiable` option (off unless a
    step must itself be differentiated), restoring the caller's mode afterwards."""

    @functools.wraps(step)
    def wrapper(self, *args, **kwargs):
        prev = _C.is_grad_enabled()
        try:
            _C._set_grad_enabled(bool(self.defaults["differentiable"]))
            return step(self, *args, **kwargs)
        finally:
            _C._set_grad_enabled(prev)

    return wrapper


def _step_with_hooks(step, captured=True):
    """Wraps a subclass's step: the step pre-hooks run first (they may replace the arguments),
    the post-hooks after; `captured`: kiln.compile captures the step (see below)."""

    @functools.wraps(step)
    def wrapper(self, *args, **kwargs):
        for pre_hook in self._optimizer_step_pre_hooks.values():
            result = pre_hook(self, args, kwargs)
            if result is not None:
                if not (isinstance(result, tuple) and len(result) == 2):
                    raise RuntimeError(
                        f"{step} must return None or a tuple of (new_args, new_kwargs), but got {result}.")
                args, kwargs = result
        out = step(self, *args, **kwargs)
        for post_hook in self._optimizer_step_post_hooks.values():
            post_hook(self, args, kwargs)
        return out

    wrapper.hooked = True
    # kiln.compile captures a step called from eager code (a training loop that runs eagerly
    # around a graph break), as TorchDynamo captures torch.optim's: one graph per step.
    if captured:
        _compiling.capture_from_eager(wrapper, _prepare_step_capture)
    return wrapper


def _step_eagerly(step, name):
    """`step` run with kiln.compile off inside (the closure it calls is not captured), a graph
    break where traced code calls it."""
    from ..compiler import disable

    uncaptured = disable(step)

    @functools.wraps(step)
    def wrapper(self, *args, **kwargs):
        return uncaptured(self, *args, **kwargs)

    wrapper.hooked = True
    return _compiling.not_traced(wrapper, f"{name}.step runs eagerly, its closure too (as torch.compile "
                                          f"runs torch.optim.{name}.step)")


def _prepare_step_capture(args):
    if args and isinstance(args[0], Optimizer):
        args[0]._prepare_capture()


def _to_scalar(x):
    """A one-element tensor option (lr, betas) as a Python number; numbers pass through."""
    if isinstance(x, Tensor):
        if x.numel() != 1:
            raise ValueError("Tensor lr must be 1-element")
        return x.item()
    return x


def _typename(obj):
    """The type's name as torch.typename writes it ("int", "kiln.Tensor", "module.Class")."""
    if isinstance(obj, Tensor):
        return "kiln.Tensor"
    module = type(obj).__module__
    return type(obj).__qualname__ if module == "builtins" else f"{module}.{type(obj).__qualname__}"


def _copy_value(value):
    """A deep copy of a param group value (numbers, tuples, lists, dicts, tensors)."""
    if isinstance(value, Tensor):
        return value.clone()
    if isinstance(value, dict):
        return type(value)((k, _copy_value(v)) for k, v in value.items())
    if isinstance(value, (list, tuple)):
        return type(value)(_copy_value(v) for v in value)
    return value


class Optimizer:
    """Base class for all optimizers.

    Args:
        params (iterable): tensors, (name, tensor) pairs, or dicts (param groups with their
            own options). Must have a deterministic order (not a set).
        defaults (dict): the default value of each option, used by groups that omit it.
    """

    def __init__(self, params, defaults):
        self.defaults = defaults
        self._optimizer_step_pre_hooks = OrderedDict()
        self._optimizer_step_post_hooks = OrderedDict()
        self._optimizer_state_dict_pre_hooks = OrderedDict()
        self._optimizer_state_dict_post_hooks = OrderedDict()
        self._optimizer_load_state_dict_pre_hooks = OrderedDict()
        self._optimizer_load_state_dict_post_hooks = OrderedDict()
        self._patch_step_function()

        if isinstance(params, Tensor):
            raise TypeError("params argument given to the optimizer should be an iterable of "
                            "Tensors or dicts, but got " + _typename(params))
        self.state = defaultdict(dict)
        self.param_groups = []
        param_groups = list(params)
        if len(param_groups) == 0:
            raise ValueError("optimizer got an empty parameter list")
        if not isinstance(param_groups[0], dict):
            param_groups = [{"params": param_groups}]
        for param_group in param_groups:
            self.add_param_group(param_group)

    def __getstate__(self):
        return {"defaults": self.defaults, "state": self.state, "param_groups": self.param_groups}

    def __setstate__(self, state):
        self.__dict__.update(state)
        for name in ("_optimizer_step_pre_hooks", "_optimizer_step_post_hooks",
                     "_optimizer_state_dict_pre_hooks", "_optimizer_state_dict_post_hooks",
                     "_optimizer_load_state_dict_pre_hooks", "_optimizer_load_state_dict_post_hooks"):
            if name not in self.__dict__:
                setattr(self, name, OrderedDict())
        self._patch_step_function()
        self.defaults.setdefault("differentiable", False)

    def __repr__(self):
        format_string = self.__class__.__name__ + " ("
        for i, group in enumerate(self.param_groups):
            format_string += "\n"
            format_string += f"Parameter Group {i}\n"
            for key in sorted(group.keys()):
                if key != "params":
                    format_string += f"    {key}: {group[key]}\n"
        format_string += ")"
        return format_string

    # False for an optimizer whose step kiln.compile never captures (LBFGS: its step calls the
    # closure, which runs a backward, again and again): the step and everything it calls run
    # eagerly, also when a compiled function calls it (a graph break there), as TorchDynamo
    # disables torch.optim.LBFGS.step.
    _step_captured = True

    def _patch_step_function(self):
        if not getattr(self.__class__.step, "hooked", False):
            step = _step_with_hooks(self.__class__.step, captured=self._step_captured)
            self.__class__.step = step if self._step_captured else _step_eagerly(step, type(self).__name__)

    # Hooks: step pre/post, state_dict pre/post, load_state_dict pre/post (torch's signatures).

    def register_step_pre_hook(self, hook):
        """hook(optimizer, args, kwargs) -> None or (new_args, new_kwargs), before each step."""
        handle = _RemovableHandle(self._optimizer_step_pre_hooks)
        self._optimizer_step_pre_hooks[handle.id] = hook
        return handle

    def register_step_post_hook(self, hook):
        """hook(optimizer, args, kwargs) -> None, after each step."""
        handle = _RemovableHandle(self._optimizer_step_post_hooks)
        self._optimizer_step_post_hooks[handle.id] = hook
        return handle

    def _register(self, hooks, hook, prepend):
        handle = _RemovableHandle(hooks)
        hooks[handle.id] = hook
        if prepend:
            hooks.move_to_end(handle.id, last=False)
        return handle

    def register_state_dict_pre_hook(self, hook, prepend=False):
        """hook(optimizer) -> None, before state_dict() builds the dict."""
        return self._register(self._optimizer_state_dict_pre_hooks, hook, prepend)

    def register_state_dict_post_hook(self, hook, prepend=False):
        """hook(optimizer, state_dict) -> state_dict or None, after state_dict()."""
        return self._register(self._optimizer_state_dict_post_hooks, hook, prepend)

    def register_load_state_dict_pre_hook(self, hook, prepend=False):
        """hook(optimizer, state_dict) -> state_dict or None, before load_state_dict()."""
        return self._register(self._optimizer_load_state_dict_pre_hooks, hook, prepend)

    def register_load_state_dict_post_hook(self, hook, prepend=False):
        """hook(optimizer) -> None, after load_state_dict()."""
        return self._register(self._optimizer_load_state_dict_post_hooks, hook, prepend)

    def state_dict(self):
        """The optimizer's state as a dict: "state" maps parameter indices (their order across
        the param groups) to their state; "param_groups" holds each group's options with
        "params" as index lists. Parameters themselves are not included."""
        for pre_hook in self._optimizer_state_dict_pre_hooks.values():
            pre_hook(self)
        param_mappings = {}
        start_index = 0

        def pack_group(group):
            nonlocal start_index
            packed = {k: v for k, v in group.items() if k != "params"}
            param_mappings.update({id(p): i for i, p in enumerate(group["params"], start_index)
                                   if id(p) not in param_mappings})
            packed["params"] = [param_mappings[id(p)] for p in group["params"]]
            start_index += len(packed["params"])
            return packed

        param_groups = [pack_group(g) for g in self.param_groups]
        packed_state = {(param_mappings[id(k)] if isinstance(k, Tensor) else k): v
                        for k, v in self.state.items()}
        state_dict = {"state": packed_state, "param_groups": param_groups}
        for post_hook in self._optimizer_state_dict_post_hooks.values():
            hook_result = post_hook(self, state_dict)
            if hook_result is not None:
                state_dict = hook_result
        return state_dict

    @staticmethod
    def _process_value_according_to_param_policy(param, value, param_id, param_groups, key=None):
        # "step" keeps its dtype (float32 on the CPU) unless the group is fused/capturable;
        # other floating state follows the parameter's dtype.
        fused = capturable = False
        for pg in param_groups:
            if param_id in pg["params"]:
                fused = pg.get("fused", False)
                capturable = pg.get("capturable", False)
                break
        if key == "step":
            if capturable or fused:
                return value.to(dtype=_C.float32, device=param.device)
            return value
        if param.is_floating_point():
            return value.to(dtype=param.dtype, device=param.device)
        return value.to(device=param.device)

    def load_state_dict(self, state_dict):
        """Loads a state dict from state_dict() (this optimizer's or torch.optim's): groups are
        matched in order and must have the same sizes; tensors are copied to each parameter's
        dtype and device."""
        state_dict = state_dict.copy()
        for pre_hook in self._optimizer_load_state_dict_pre_hooks.values():
            hook_result = pre_hook(self, state_dict)
            if hook_result is not None:
                state_dict = hook_result
        groups = self.param_groups
        saved_groups = _copy_value(state_dict["param_groups"])
        if len(groups) != len(saved_groups):
            raise ValueError("loaded state dict has a different number of parameter groups")
        if any(len(g["params"]) != len(s["params"]) for g, s in zip(groups, saved_groups)):
            raise ValueError("loaded state dict contains a parameter group that doesn't match "
                             "the size of optimizer's group")
        id_map = dict(zip(itertools.chain.from_iterable(g["params"] for g in saved_groups),
                          itertools.chain.from_iterable(g["params"] for g in groups)))

        def cast(param, value, param_id=None, param_groups=None, key=None):
            if isinstance(value, Tensor):
                return Optimizer._process_value_according_to_param_policy(
                    param, value, param_id, param_groups, key)
            if isinstance(value, dict):
                return {k: cast(param, v, param_id=param_id, param_groups=param_groups, key=k)
                        for k, v in value.items()}
            if isinstance(value, Iterable) and not isinstance(value, (str, bytes)):
                return type(value)(cast(param, v, param_id=param_id, param_groups=param_groups)
                                   for v in value)
            return value

        state = defaultdict(dict)
        for k, v in state_dict["state"].items():
            if k in id_map:
                param = id_map[k]
                state[param] = cast(param, v, param_id=k, param_groups=state_dict["param_groups"])
            else:
                state[k] = v

        def update_group(group, new_group):
            new_group["params"] = group["params"]
            if "param_names" in group and "param_names" not in new_group:
                new_group["param_names"] = group["param_names"]
            return new_group

        param_groups = [update_group(g, ng) for g, ng in zip(groups, saved_groups)]
        self.__setstate__({"state": state, "param_groups": param_groups})
        for post_hook in self._optimizer_load_state_dict_post_hooks.values():
            post_hook(self)

    @staticmethod
    def _check_fused(fused, differentiable, foreach):
        """PyTorch's errors for `fused` combined with `differentiable` or `foreach`."""
        if fused:
            if differentiable:
                raise RuntimeError("`fused` does not support `differentiable`")
            if foreach:
                raise RuntimeError("`fused` and `foreach` cannot be `True` together.")

    def _prepare_capture(self):
        """Before kiln.compile traces a step: makes the state the step would make (zeros), so
        the first graph already reads it and the second step does not recompile; TorchDynamo
        runs torch.optim's `_init_group` for real while tracing for the same reason. Optimizers
        whose state the step itself computes (SGD's momentum buffer, a copy of the first grad)
        make none here, as torch's."""

    @functools.partial(_compiling.not_traced, reason="Optimizer.zero_grad runs eagerly (as "
                       "torch.optim's, which is torch._disable_dynamo)")
    def zero_grad(self, set_to_none=True):
        """Resets the parameters' gradients: to None (the default), or to zeros in place."""
        for group in self.param_groups:
            for p in group["params"]:
                grad = getattr(p, "grad", None)
                if grad is None:
                    continue
                if set_to_none:
                    p.grad = None
                else:
                    if getattr(grad, "grad_fn", None) is not None:
                        grad.detach_()
                    else:
                        grad.requires_grad_(False)
                    grad.zero_()

    def step(self, closure=None):
        """Performs one optimization step (subclasses implement it). `closure`, if given,
        re-evaluates the model (with grad enabled) and returns the loss."""
        raise NotImplementedError

    def _closure_loss(self, closure):
        if closure is None:
            return None
        with enable_grad():
            return closure()

    def add_param_group(self, param_group):
        """Adds a param group (a dict with "params" and any options to override)."""
        if not isinstance(param_group, dict):
            raise TypeError(f"param_group must be a dict, but got {type(param_group)}")
        params = param_group["params"]
        if isinstance(params, Tensor):
            param_group["params"] = [params]
        elif isinstance(params, set):
            raise TypeError("optimizer parameters need to be organized in ordered collections, "
                            "but the ordering of tensors in sets will change between runs. "
                            "Please use a list instead.")
        else:
            param_group["params"] = list(params)

        tensors, names = [], []
        for param in param_group["params"]:
            if isinstance(param, tuple):
                names.append(param[0])
                tensors.append(param[1])
            else:
                tensors.append(param)
        param_group["params"] = tensors
        if names:
            if len(names) != len(tensors):
                raise ValueError("all optimizer params should be with/without names. "
                                 "Some param names are missing")
            param_group["param_names"] = names

        for param in param_group["params"]:
            if not isinstance(param, Tensor):
                raise TypeError("optimizer can only optimize Tensors, but one of the params is "
                                + _typename(param))
            if not self.defaults.get("differentiable", None) and not (
                    getattr(param, "is_leaf", True) or getattr(param, "retains_grad", False)):
                raise ValueError("can't optimize a non-leaf Tensor")

        for name, default in self.defaults.items():
            if default is required and name not in param_group:
                raise ValueError("parameter group didn't specify a value of required "
                                 f"optimization parameter {name}")
            param_group.setdefault(name, default)

        params = param_group["params"]
        if len(params) != len(set(params)):
            warnings.warn("optimizer contains a parameter group with duplicate parameters; "
                          "in future, this will cause an error; "
                          "see github.com/pytorch/pytorch/issues/40967 for more information",
                          stacklevel=3)
        param_set = set()
        for group in self.param_groups:
            param_set.update(set(group["params"]))
            if ("param_names" in param_group) != ("param_names" in group):
                current = "with names" if "param_names" in param_group else "without names"
                raise ValueError("all optimizer param groups should be with/without names. "
                                 f"cannot add param group {current} to the optimizer")
        if not param_set.isdisjoint(set(param_group["params"])):
            raise ValueError("some parameters appear in more than one parameter group")
        self.param_groups.append(param_group)
