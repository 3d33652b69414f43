"""nn.Module: the container of parameters, buffers and submodules, with torch's API."""
import warnings
from collections import OrderedDict

from ... import _C
from ..._tensor import Tensor
from ...utils.hooks import RemovableHandle
from ..parameter import Buffer, Parameter, is_lazy
from .state_dict import StateDictMixin, _IncompatibleKeys  # noqa: F401


class Module(StateDictMixin):
    """Base class of every layer and model: subclasses define forward()."""

    training: bool
    call_super_init = False

    def __init__(self, *args, **kwargs):
        if args or kwargs:
            raise TypeError(f"{type(self).__name__}.__init__() got unexpected arguments")
        object.__setattr__(self, "training", True)
        object.__setattr__(self, "_parameters", OrderedDict())
        object.__setattr__(self, "_buffers", OrderedDict())
        object.__setattr__(self, "_non_persistent_buffers_set", set())
        object.__setattr__(self, "_modules", OrderedDict())
        object.__setattr__(self, "_forward_hooks", OrderedDict())
        object.__setattr__(self, "_forward_pre_hooks", OrderedDict())
        # Hook ids registered with with_kwargs=True, and forward hooks with always_call=True.
        object.__setattr__(self, "_forward_pre_hooks_with_kwargs", {})
        object.__setattr__(self, "_forward_hooks_with_kwargs", {})
        object.__setattr__(self, "_forward_hooks_always_called", {})
        object.__setattr__(self, "_backward_hooks", OrderedDict())
        object.__setattr__(self, "_backward_pre_hooks", OrderedDict())

    # -- forward ------------------------------------------------------------------------
    def forward(self, *args, **kwargs):
        raise NotImplementedError(f'Module [{type(self).__name__}] is missing the required "forward" function')

    _compiled_call_impl = None  # set by Module.compile()

    def __call__(self, *args, **kwargs):
        if self._compiled_call_impl is not None:
            return self._compiled_call_impl(self, *args, **kwargs)
        if not self._forward_pre_hooks and not self._forward_hooks and not _has_backward_hooks(self):
            return self.forward(*args, **kwargs)
        return self._call_with_hooks(args, kwargs)

    def compile(self, *args, **kwargs):
        """Compiles this module's calls in place with kiln.compile(*args, **kwargs), as torch's
        nn.Module.compile: the module stays itself (its class, parameters and state_dict keys,
        unlike kiln.compile(module)'s wrapper); each later call, hooks included, runs compiled."""
        from ...compiler.compile_api import compile as kiln_compile

        object.__setattr__(self, "_compiled_call_impl", kiln_compile(_call_uncompiled, *args, **kwargs))

    def _call_with_hooks(self, args, kwargs):
        for hook_id, hook in list(self._forward_pre_hooks.items()):
            if hook_id in self._forward_pre_hooks_with_kwargs:
                result = hook(self, args, kwargs)
                if result is not None:
                    if not (isinstance(result, tuple) and len(result) == 2):
                        raise RuntimeError("forward pre-hook must return None or a tuple of (new_args, new_kwargs), "
                                           f"but got {result}.")
                    args, kwargs = result
            else:
                result = hook(self, args)
                if result is not None:
                    args = result if isinstance(result, tuple) else (result,)
        called = set()
        backward = _BackwardHooks(self, args) if _has_backward_hooks(self) else None
        if backward is not None:
            args = backward.wrap_inputs(args)
        try:
            out = self.forward(*args, **kwargs)
            for hook_id, hook in list(self._forward_hooks.items()):
                called.add(hook_id)
                if hook_id in self._forward_hooks_with_kwargs:
                    result = hook(self, args, kwargs, out)
                else:
                    result = hook(self, args, out)
                if result is not None:
                    out = result
            return backward.wrap_outputs(out) if backward is not None else out
        except Exception:
            # always_call hooks still run (with no output) when forward or a hook raised.
            for hook_id, hook in list(self._forward_hooks.items()):
                if hook_id in self._forward_hooks_always_called and hook_id not in called:
                    try:
                        if hook_id in self._forward_hooks_with_kwargs:
                            hook(self, args, kwargs, None)
                        else:
                            hook(self, args, None)
                    except Exception:
                        warnings.warn("module forward hook with ``always_call=True`` raised an exception that was "
                                      "silenced as another error was raised in forward", stacklevel=2)
            raise

    def register_forward_pre_hook(self, hook, *, prepend=False, with_kwargs=False):
        handle = RemovableHandle(self._forward_pre_hooks, extra_dict=self._forward_pre_hooks_with_kwargs)
        self._forward_pre_hooks[handle.id] = hook
        if with_kwargs:
            self._forward_pre_hooks_with_kwargs[handle.id] = True
        if prepend:
            self._forward_pre_hooks.move_to_end(handle.id, last=False)
        return handle

    def register_forward_hook(self, hook, *, prepend=False, with_kwargs=False, always_call=False):
        handle = RemovableHandle(self._forward_hooks,
                                 extra_dict=[self._forward_hooks_with_kwargs, self._forward_hooks_always_called])
        self._forward_hooks[handle.id] = hook
        if with_kwargs:
            self._forward_hooks_with_kwargs[handle.id] = True
        if always_call:
            self._forward_hooks_always_called[handle.id] = True
        if prepend:
            self._forward_hooks.move_to_end(handle.id, last=False)
        return handle

    def register_full_backward_hook(self, hook, prepend=False):
        """hook(module, grad_input, grad_output) -> new grad_input or None, called when the
        gradients of the module's positional tensor inputs are computed (grad_input holds None
        for inputs that are not tensors or need no gradient)."""
        handle = RemovableHandle(self._backward_hooks)
        self._backward_hooks[handle.id] = hook
        if prepend:
            self._backward_hooks.move_to_end(handle.id, last=False)
        return handle

    def register_full_backward_pre_hook(self, hook, prepend=False):
        """hook(module, grad_output) -> new grad_output or None, called when the gradients of
        the module's outputs are computed, before those of its inputs."""
        handle = RemovableHandle(self._backward_pre_hooks)
        self._backward_pre_hooks[handle.id] = hook
        if prepend:
            self._backward_pre_hooks.move_to_end(handle.id, last=False)
        return handle

    # -- registration -------------------------------------------------------------------
    def register_parameter(self, name, param):
        if "_parameters" not in self.__dict__:
            raise AttributeError("cannot assign parameter before Module.__init__() call")
        self._check_name(name, "parameter")
        if param is not None and not isinstance(param, Parameter):
            raise TypeError(
                f"cannot assign '{type(param).__name__}' object to parameter '{name}' (kiln.nn.Parameter or None required)")
        self._parameters[name] = param

    def register_buffer(self, name, tensor, persistent=True):
        if "_buffers" not in self.__dict__:
            raise AttributeError("cannot assign buffer before Module.__init__() call")
        self._check_name(name, "buffer")
        if tensor is not None and not isinstance(tensor, Tensor):
            raise TypeError(f"cannot assign '{type(tensor).__name__}' object to buffer '{name}' (kiln Tensor or None required)")
        self._buffers[name] = tensor
        if persistent:
            self._non_persistent_buffers_set.discard(name)
        else:
            self._non_persistent_buffers_set.add(name)

    def add_module(self, name, module):
        if module is not None and not isinstance(module, Module):
            raise TypeError(f"{type(module).__name__} is not a Module subclass")
        if not isinstance(name, str):
            raise TypeError(f"module name should be a string. Got {type(name).__name__}")
        if "." in name or name == "":
            raise KeyError(f'module name can\'t contain ".", got: {name}' if name else 'module name can\'t be empty string ""')
        self._modules[name] = module

    register_module = add_module

    def _check_name(self, name, kind):
        if not isinstance(name, str):
            raise TypeError(f"{kind} name should be a string. Got {type(name).__name__}")
        if "." in name:
            raise KeyError(f'{kind} name can\'t contain "."')
        if name == "":
            raise KeyError(f'{kind} name can\'t be empty string ""')
        if hasattr(self, name) and name not in self._parameters and name not in self._buffers:
            if name not in self._modules:
                raise KeyError(f"attribute '{name}' already exists")

    def __setattr__(self, name, value):
        d = self.__dict__
        params = d.get("_parameters")
        if isinstance(value, Parameter):
            if params is None:
                raise AttributeError("cannot assign parameters before Module.__init__() call")
            self._remove_from(name, d.get("_buffers"), d.get("_modules"), d)
            self.register_parameter(name, value)
        elif params is not None and name in params:
            if value is not None:
                raise TypeError(f"cannot assign '{type(value).__name__}' as parameter '{name}' (kiln.nn.Parameter or None expected)")
            self.register_parameter(name, value)
        elif isinstance(value, Module):
            modules = d.get("_modules")
            if modules is None:
                raise AttributeError("cannot assign module before Module.__init__() call")
            self._remove_from(name, params, d.get("_buffers"), d)
            modules[name] = value
        elif d.get("_modules") is not None and name in d["_modules"]:
            if value is not None:
                raise TypeError(f"cannot assign '{type(value).__name__}' as child module '{name}' (kiln.nn.Module or None expected)")
            d["_modules"][name] = value
        elif isinstance(value, Buffer) or (d.get("_buffers") is not None and name in d["_buffers"]):
            if value is not None and not isinstance(value, Tensor):
                raise TypeError(f"cannot assign '{type(value).__name__}' as buffer '{name}' (kiln.Tensor or None expected)")
            persistent = getattr(value, "persistent", name not in self._non_persistent_buffers_set)
            self._remove_from(name, params, d.get("_modules"), d)
            self.register_buffer(name, value, persistent)
        else:
            object.__setattr__(self, name, value)

    @staticmethod
    def _remove_from(name, *dicts):
        for dd in dicts:
            if dd is not None and name in dd:
                del dd[name]

    def __getattr__(self, name):
        d = self.__dict__
        for key in ("_parameters", "_buffers", "_modules"):
            store = d.get(key)
            if store is not None and name in store:
                return store[name]
        raise AttributeError(f"'{type(self).__name__}' object has no attribute '{name}'")

    def __delattr__(self, name):
        for key in ("_parameters", "_buffers", "_modules"):
            store = self.__dict__.get(key)
            if store is not None and name in store:
                del store[name]
                self._non_persistent_buffers_set.discard(name)
                return
        object.__delattr__(self, name)

    def __dir__(self):
        keys = list(super().__dir__()) + list(self._parameters) + list(self._buffers) + list(self._modules)
        return sorted(k for k in set(keys) if not k[0].isdigit())

    def __getstate__(self):
        return self.__dict__.copy()

    def __setstate__(self, state):
        self.__dict__.update(state)

    # -- traversal ----------------------------------------------------------------------
    def named_modules(self, memo=None, prefix="", remove_duplicate=True):
        if memo is None:
            memo = set()
        if remove_duplicate:
            if id(self) in memo:
                return
            memo.add(id(self))
        yield prefix, self
        for name, module in self._modules.items():
            if module is None:
                continue
            yield from module.named_modules(memo, prefix + ("." if prefix else "") + name, remove_duplicate)

    def modules(self):
        for _, m in self.named_modules():
            yield m

    def named_children(self):
        seen = set()
        for name, module in self._modules.items():
            if module is not None and id(module) not in seen:
                seen.add(id(module))
                yield name, module

    def children(self):
        for _, m in self.named_children():
            yield m

    def _named_members(self, get_members, prefix="", recurse=True, remove_duplicate=True):
        seen = set()
        modules = self.named_modules(prefix=prefix, remove_duplicate=remove_duplicate) if recurse else [(prefix, self)]
        for module_prefix, module in modules:
            for name, value in get_members(module):
                if value is None:
                    continue
                if remove_duplicate:
                    if id(value) in seen:
                        continue
                    seen.add(id(value))
                yield (module_prefix + ("." if module_prefix else "") + name), value

    def named_parameters(self, prefix="", recurse=True, remove_duplicate=True):
        yield from self._named_members(lambda m: m._parameters.items(), prefix, recurse, remove_duplicate)

    def parameters(self, recurse=True):
        for _, p in self.named_parameters(recurse=recurse):
            yield p

    def named_buffers(self, prefix="", recurse=True, remove_duplicate=True):
        yield from self._named_members(lambda m: m._buffers.items(), prefix, recurse, remove_duplicate)

    def buffers(self, recurse=True):
        for _, b in self.named_buffers(recurse=recurse):
            yield b

    def get_submodule(self, target):
        mod = self
        if target == "":
            return mod
        for item in target.split("."):
            if item not in mod._modules:
                raise AttributeError(f"{type(mod).__name__} has no attribute `{item}`")
            mod = mod._modules[item]
        return mod

    def get_parameter(self, target):
        module_path, _, name = target.rpartition(".")
        mod = self.get_submodule(module_path)
        if name not in mod._parameters:
            raise AttributeError(f"`{name}` is not an nn.Parameter")
        return mod._parameters[name]

    # -- modes and conversion -------------------------------------------------------------
    def train(self, mode=True):
        if not isinstance(mode, bool):
            raise ValueError("training mode is expected to be boolean")
        self.training = mode
        for module in self.children():
            module.train(mode)
        return self

    def eval(self):
        return self.train(False)

    def requires_grad_(self, requires_grad=True):
        for p in self.parameters():
            p.requires_grad_(requires_grad)
        return self

    def zero_grad(self, set_to_none=True):
        """Drops every parameter's .grad (set_to_none) or zeroes it in place, detached."""
        for p in self.parameters():
            if getattr(p, "grad", None) is None:
                continue
            if set_to_none:
                p.grad = None
            else:
                if getattr(p.grad, "grad_fn", None) is not None:
                    p.grad.detach_()
                else:
                    p.grad.requires_grad_(False)
                p.grad.zero_()

    def apply(self, fn):
        for module in self.children():
            module.apply(fn)
        fn(self)
        return self

    def _apply(self, fn):
        """Replaces every parameter's and buffer's data by fn(tensor) (to, float, double...)."""
        for module in self.children():
            module._apply(fn)
        for name, p in self._parameters.items():
            if is_lazy(p):  # a placeholder stays one, of the new dtype and device
                moved = fn(p.detach())
                self._parameters[name] = type(p)(p.requires_grad, device=moved.device, dtype=moved.dtype)
            elif p is not None:
                # The Parameter object stays (an optimizer made before `model.to(...)` holds it),
                # its data replaced, as PyTorch does; so is its gradient's.
                applied = fn(p.detach())
                if applied is not p and not _same_tensor(applied, p):
                    with _no_grad():
                        p.data = applied
                if p.grad is not None:
                    g = fn(p.grad)
                    if g is not p.grad and not _same_tensor(g, p.grad):
                        p.grad = g
        for name, b in self._buffers.items():
            if is_lazy(b):
                moved = fn(b)
                self._buffers[name] = type(b)(b.requires_grad, device=moved.device, dtype=moved.dtype)
            elif b is not None:
                self._buffers[name] = fn(b)
        return self

    def to_empty(self, *, device, recurse=True):
        """Moves parameters and buffers to `device` without copying their values (uninitialized
        memory): the step after building a model on the meta device."""
        from ... import empty_like
        if not recurse:
            raise NotImplementedError("Module.to_empty(recurse=False) is not supported")
        return self._apply(lambda t: empty_like(t, device=device))

    def to(self, *args, **kwargs):
        fmt = kwargs.pop("memory_format", None)

        def convert(t):
            out = t.to(*args, **kwargs) if t.is_floating_point() or not _has_dtype(args, kwargs) else t
            # as torch's: the format applies to the 4-D (channels_last) or 5-D (channels_last_3d) ones
            return out.contiguous(memory_format=fmt) if fmt is not None and t.dim() in (4, 5) else out
        return self._apply(convert)

    def float(self):
        return self._apply(lambda t: t.float() if t.is_floating_point() else t)

    def double(self):
        return self._apply(lambda t: t.double() if t.is_floating_point() else t)

    def half(self):
        return self._apply(lambda t: t.half() if t.is_floating_point() else t)

    def bfloat16(self):
        return self._apply(lambda t: t.bfloat16() if t.is_floating_point() else t)

    def cpu(self):
        return self._apply(lambda t: t.cpu())

    def cuda(self, device=None):
        return self._apply(lambda t: t.cuda(device))

    def type(self, dst_type):
        return self._apply(lambda t: t.type(dst_type))

    # -- printing -------------------------------------------------------------------------
    def extra_repr(self):
        return ""

    def _get_name(self):
        return type(self).__name__

    def __repr__(self):
        lines = []
        extra = self.extra_repr()
        if extra:
            lines = extra.split("\n")
        child_lines = []
        for key, module in self._modules.items():
            mod_str = _add_indent(repr(module), 2)
            child_lines.append("(" + key + "): " + mod_str)
        main = self._get_name() + "("
        if lines and len(lines) == 1 and not child_lines:
            main += lines[0]
        elif lines or child_lines:
            main += "\n  " + "\n  ".join(lines + child_lines) + "\n"
        return main + ")"


def _has_dtype(args, kwargs):
    from ... import _C

    return "dtype" in kwargs or any(isinstance(a, _C.dtype) for a in args)


def _add_indent(text, spaces):
    lines = text.split("\n")
    if len(lines) == 1:
        return text
    return lines[0] + "\n" + "\n".join(" " * spaces + line for line in lines[1:])


def _has_backward_hooks(module):
    # getattr: a module whose __init__ skipped Module.__init__'s attributes (unpickled, copied)
    return bool(getattr(module, "_backward_hooks", None) or getattr(module, "_backward_pre_hooks", None))


class _BackwardHooks:
    """One call's full backward hooks, as torch.utils.hooks.BackwardHook: the positional tensor
    inputs and the outputs pass through identity autograd Functions; the outputs' backward sees
    grad_output (the pre-hooks may replace it), the inputs' backward sees grad_input and calls the
    hooks. With no input needing a gradient, the hooks run from the outputs' backward with
    grad_input all None."""

    def __init__(self, module, args):
        self.module = module
        self.n_inputs = len(args)
        self.input_index = []
        self.grad_output = None

    def _tensor_positions(self, values):
        return [i for i, v in enumerate(values) if isinstance(v, _C.TensorBase) and v.requires_grad]

    def wrap_inputs(self, args):
        from ...autograd import is_grad_enabled
        self.input_index = self._tensor_positions(args) if is_grad_enabled() else []
        if not self.input_index:
            return args
        new = _identity_apply(self._on_grad_input, [args[i] for i in self.input_index])
        args = list(args)
        for i, t in zip(self.input_index, new):
            args[i] = t
        return tuple(args)

    def wrap_outputs(self, out):
        from ...autograd import is_grad_enabled
        single = isinstance(out, _C.TensorBase)
        outs = (out,) if single else out
        if not isinstance(outs, tuple) or not is_grad_enabled():
            return out
        index = self._tensor_positions(outs)
        if not index:
            return out
        self.n_outputs, self.output_index = len(outs), index
        new = _identity_apply(self._on_grad_output, [outs[i] for i in index])
        outs = list(outs)
        for i, t in zip(index, new):
            outs[i] = t
        return outs[0] if single else tuple(outs)

    @staticmethod
    def _spread(index, values, n):
        full = [None] * n
        for i, v in zip(index, values):
            full[i] = v
        return tuple(full)

    def _on_grad_output(self, grads):
        full = self._spread(self.output_index, grads, self.n_outputs)
        for hook in list(self.module._backward_pre_hooks.values()):
            result = hook(self.module, full)
            if result is not None:
                full = tuple(result) if isinstance(result, (tuple, list)) else (result,)
        self.grad_output = full
        if not self.input_index:  # nothing below needs a gradient: the hooks run now
            for hook in list(self.module._backward_hooks.values()):
                hook(self.module, (None,) * self.n_inputs, self.grad_output)
        return [full[i] for i in self.output_index]

    def _on_grad_input(self, grads):
        full = self._spread(self.input_index, grads, self.n_inputs)
        for hook in list(self.module._backward_hooks.values()):
            result = hook(self.module, full, self.grad_output)
            if result is not None:
                full = tuple(result) if isinstance(result, (tuple, list)) else (result,)
                if len(full) != self.n_inputs:
                    raise RuntimeError(f"backward hook returned an invalid number of grad_input, got "
                                       f"{len(full)}, but expected {self.n_inputs}")
        return [full[i] for i in self.input_index]


def _identity_apply(on_grads, tensors):
    """tensors through an identity autograd Function whose backward hands its gradients to
    on_grads (which returns the gradients to pass on)."""
    from ...autograd import Function

    class _HookIdentity(Function):
        @staticmethod
        def forward(ctx, *ts):
            return tuple(t.clone() for t in ts)

        @staticmethod
        def backward(ctx, *grads):
            return tuple(on_grads(grads))

    out = _HookIdentity.apply(*tensors)
    return out if isinstance(out, tuple) else (out,)


def _call_uncompiled(module, *args, **kwargs):
    """Module.__call__ without the compiled path: what Module.compile compiles."""
    if not module._forward_pre_hooks and not module._forward_hooks and not _has_backward_hooks(module):
        return module.forward(*args, **kwargs)
    return module._call_with_hooks(args, kwargs)


def _same_tensor(a, b):
    """Whether `a` is `b`'s memory seen the same way (a conversion that changed nothing)."""
    return (a.device == b.device and a.dtype == b.dtype and a.shape == b.shape and a.stride() == b.stride()
            and a.data_ptr() == b.data_ptr() and not a.is_meta)


def _no_grad():
    from ... import no_grad
    return no_grad()
