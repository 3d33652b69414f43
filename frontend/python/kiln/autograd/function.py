"""kiln.autograd.Function: user-defined ops with a hand-written backward (torch.autograd.Function)."""
import functools

from .. import _C
from .grad_mode import no_grad


class FunctionCtx:
    """The `ctx` a Function's forward and backward share."""

    def __init__(self):
        self.to_save = ()
        self.dirty_tensors = ()
        self.non_differentiable = ()
        self.materialize_grads = True
        self.needs_input_grad = ()

    def save_for_backward(self, *tensors):
        for t in tensors:
            if t is not None and not isinstance(t, _C.TensorBase):
                raise TypeError("save_for_backward can only save variables, but argument "
                                f"{tensors.index(t)} is of type {type(t).__name__}")
        self.to_save = tensors

    def save_for_forward(self, *tensors):
        self.saved_for_forward = tensors

    @property
    def saved_tensors(self):
        saved = getattr(self, "_saved_unpacked", None)
        if saved is not None:
            return saved
        if getattr(self, "_in_forward_done", False):
            raise RuntimeError("saved_tensors are only available inside backward in kiln")
        return tuple(self.to_save)

    def mark_dirty(self, *args):
        self.dirty_tensors = args

    def mark_non_differentiable(self, *args):
        self.non_differentiable = args

    def set_materialize_grads(self, value):
        self.materialize_grads = bool(value)


class _FunctionMeta(type):
    def __init__(cls, name, bases, attrs):
        super().__init__(name, bases, attrs)
        cls._backward_name = f"{name}Backward"


class Function(metaclass=_FunctionMeta):
    """Subclass with static `forward(ctx, *args)` (or `forward(*args)` plus `setup_context(ctx,
    inputs, output)`) and `backward(ctx, *grad_outputs)`; call with `apply`."""

    def __init__(self, *args, **kwargs):
        pass

    @staticmethod
    def forward(*args, **kwargs):
        raise NotImplementedError("You must implement the forward function for custom autograd.Function.")

    @staticmethod
    def backward(ctx, *grad_outputs):
        raise NotImplementedError("You must implement either the backward or vjp method for your custom "
                                  "autograd.Function to use it with backward mode AD.")

    vjp = backward

    @staticmethod
    def setup_context(ctx, inputs, output):
        raise NotImplementedError("setup_context is not implemented.")

    @classmethod
    def apply(cls, *args, **kwargs):
        ctx = FunctionCtx()
        ctx.needs_input_grad = tuple(isinstance(a, _C.TensorBase) and a.requires_grad for a in args)
        custom_setup = cls.setup_context is not Function.setup_context
        forward = _uncaptured_forward(cls)
        with no_grad():
            if custom_setup:
                output = forward(*args, **kwargs)
            else:
                output = forward(ctx, *args, **kwargs)
        if custom_setup:
            cls.setup_context(ctx, args, output)
        single = not isinstance(output, tuple)
        outputs = (output,) if single else output
        if _C.is_grad_enabled() and any(ctx.needs_input_grad):
            backward = _uncaptured(cls, "backward" if cls.backward is not Function.backward else "vjp")
            outputs = tuple(_C._record_function(
                ctx, backward, cls._backward_name, list(args), list(outputs), list(ctx.to_save),
                list(ctx.dirty_tensors), list(ctx.non_differentiable), ctx.materialize_grads))
        return outputs[0] if single else outputs


def _uncaptured_forward(cls):
    """cls.forward as kiln.compiler.disable wraps it. When a compiled function breaks at apply
    (the backward is Python code a graph cannot hold), apply runs eagerly and forward must too:
    captured as a frame of its own, it would guard on the identity of each call's new ctx
    (a recompile per call), and ctx.save_for_backward, run for real while tracing, would keep the
    trace's fake tensors for the backward."""
    return _uncaptured(cls, "forward")


def _uncaptured(cls, name):
    """cls.<name> (forward, backward or vjp) as kiln.compiler.disable wraps it, made once per
    class. The backward, called by the autograd engine under a compiled function, runs eagerly
    too: captured, its frame guarded the identity of each call's new ctx and compiled again at
    every call (ste_quant), or broke at ctx.saved_tensors; torch.compile compiles no graph of its
    own for it either (the backward is part of the traced autograd.Function)."""
    attr = f"_kiln_uncaptured_{name}"
    fn = cls.__dict__.get(attr)
    if fn is None or fn[0] is not getattr(cls, name):
        from ..compiler.compile_api import disable

        fn = (getattr(cls, name), disable(getattr(cls, name)))
        setattr(cls, attr, fn)
    return fn[1]


def once_differentiable(fn):
    """Marks a backward as not differentiable itself: it runs without recording."""

    @functools.wraps(fn)
    def wrapper(ctx, *args):
        with no_grad():
            return fn(ctx, *args)

    return wrapper
