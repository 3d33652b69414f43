"""kiln.autograd.Function: user-defined ops with a hand-written backward (torch.autograd.Function)."""
import contextlib
import dis
import functools
import inspect
import itertools
import threading
import types

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
        for i, t in enumerate(tensors):
            if t is not None and not isinstance(t, _C.TensorBase):
                raise TypeError("save_for_backward can only save variables, but argument "
                                f"{i} is of type {type(t).__name__}")
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
        needs_input_grad = tuple(isinstance(a, _C.TensorBase) and a.requires_grad for a in args)
        if any(needs_input_grad) and _C.is_grad_enabled() and _C._custom_function_captured():
            return _capture(cls, args, kwargs)
        return _apply(cls, args, kwargs, needs_input_grad)


def _apply(cls, args, kwargs, needs_input_grad):
    """Function.apply as autograd runs it: eagerly, or on the fakes of kiln.compile's traces
    (the ops of forward and backward are then recorded)."""
    ctx = FunctionCtx()
    ctx.needs_input_grad = needs_input_grad
    custom_setup = cls.setup_context is not Function.setup_context
    forward = _uncaptured_forward(cls)
    with no_grad():  # setup_context too, as torch: what it saves has no history
        if custom_setup:
            output = forward(*args, **kwargs)
            cls.setup_context(ctx, args, output)
        else:
            output = forward(ctx, *args, **kwargs)
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
    (a Function that cannot be traced: see _capture), apply runs eagerly and forward must too:
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


# -- kiln.compile: an application captured as one graph node ---------------------------------
#
# The capture (frontend/binding/CustomFunctionBinding.h) records `apply_captured(key, tensors...)`
# after running the application and its backward on fakes apart from the graph. The node's
# tensors are the tensor arguments, then the real tensors the Function's code reads by itself
# (a module's parameters) that are no argument. Running the node runs the application: eagerly
# (the eager backend, op by op), or on the fakes of retrace and AOT's joint trace, whose engine
# run then records the Python backward's ops.

# key -> _Application, while a graph that may run holds its node: an application a trace made
# and its graph does not hold (a failed or partial trace) is dropped when the trace ends
# (applications_of_trace), the rest when kiln.compiler.reset() forgets every graph.
_applications = {}
_keys = itertools.count()
_traces = threading.local()  # .made: the keys made by each trace running on this thread


@contextlib.contextmanager
def applications_of_trace():
    """`with applications_of_trace() as keep:` around one trace of a frame; `keep(graph)` (the
    trace's graph, or None when it failed) keeps the applications the graph holds and drops the
    others the trace made (re-traces at a break, probes, failed traces)."""
    stack = _traces.__dict__.setdefault("made", [])
    made = []
    stack.append(made)
    kept = set()

    def keep(graph):
        if graph is not None:
            kept.update(n.args[0] for n in graph.nodes if n.op == "call_function" and n.target == _APPLY_TARGET)

    try:
        yield keep
    finally:
        stack.pop()
        for key in made:
            if key not in kept:
                _applications.pop(key, None)


def forget_applications():
    """kiln.compiler.reset(): no graph that holds an application is kept."""
    _applications.clear()


_APPLY_TARGET = f"{__name__}.apply_captured"


class _Application:
    """What a captured application is beyond its tensors: the class, the arguments that are no
    tensors, where its tensor outputs go in what forward returns, the real tensors its code reads
    (each with the index of the node's tensor argument standing for it)."""

    def __init__(self, cls, args, kwargs):
        self.cls, self.kwargs = cls, kwargs
        self.slots = [i for i, a in enumerate(args) if isinstance(a, _C.TensorBase)]
        self.args = [None if i in self.slots else a for i, a in enumerate(args)]
        self.output = None  # (single, items: an int picks a tensor output, else a constant)
        self.stand_ins = ()

    def arguments(self, tensors):
        args = list(self.args)
        for i, t in zip(self.slots, tensors):
            args[i] = t
        return args

    def flatten(self, result):
        single = not isinstance(result, tuple)
        items, tensors = [], []
        for r in (result,) if single else result:
            if isinstance(r, _C.TensorBase):
                items.append(len(tensors))
                tensors.append(r)
            else:
                items.append(_Constant(r))
        self.output = (single, items)
        return tensors

    def unflatten(self, tensors):
        single, items = self.output
        out = tuple(tensors[i] if isinstance(i, int) else i.value for i in items)
        return out[0] if single else out


class _Constant:
    __slots__ = ("value",)

    def __init__(self, value):
        self.value = value


def _holds_tensor(value):
    if isinstance(value, _C.TensorBase):
        return True
    if isinstance(value, (list, tuple)):
        return any(_holds_tensor(v) for v in value)
    if isinstance(value, dict):
        return any(_holds_tensor(v) for v in value.values())
    return False


def _capture(cls, args, kwargs):
    """apply while kiln.compile captures: one node (NotImplementedError: a graph break, and the
    application runs eagerly, as before)."""
    reason = _side_effect(cls)
    if reason is None and any(_holds_tensor(a) for a in args if not isinstance(a, _C.TensorBase)):
        reason = "a tensor inside a container argument"
    if reason is None and _holds_tensor(kwargs):
        reason = "a tensor keyword argument"
    if reason is not None:
        raise NotImplementedError(f"custom autograd.Function {cls.__name__}: {reason}; it runs eagerly")
    app = _Application(cls, args, kwargs)

    def run(tensors, speculate):
        arguments = app.arguments(tensors)
        needs = tuple(isinstance(a, _C.TensorBase) and a.requires_grad for a in arguments)
        return app.flatten(_apply(cls, arguments, kwargs, needs))

    key = next(_keys)
    outputs, stand_ins = _C._capture_custom_function(key, [args[i] for i in app.slots], run, cls.__name__)
    app.stand_ins = tuple(stand_ins)
    _applications[key] = app
    for made in getattr(_traces, "made", ())[-1:]:
        made.append(key)
    return app.unflatten(outputs)


def apply_captured(key, *tensors):
    """The node of captured application `key`: the application on `tensors` (its tensor
    arguments, then the real tensors its code reads), returning its tensor outputs."""
    app = _applications.get(key)
    if app is None:
        raise RuntimeError(f"a graph holding custom autograd.Function application {key} ran after "
                           "kiln.compiler.reset() forgot it: compile the function again")
    if _C._recording():
        for real, index in app.stand_ins:
            _C._stand_in(real, tensors[index])
    result = app.cls.apply(*app.arguments(tensors[:len(app.slots)]), **app.kwargs)
    return tuple(app.flatten(result))


# Writes that a graph would lose: the capture traces forward and backward by running them on
# fakes, once, so a write to state outside the application would happen at the trace only.
_MUTATING_METHODS = frozenset({"append", "extend", "insert", "pop", "remove", "clear", "update",
                               "setdefault", "add", "discard", "popitem", "debug", "info", "warning",
                               "warn", "error", "exception", "critical", "log", "write"})


def _side_effect(cls):
    """A reason why cls's forward, setup_context or backward has a side effect outside the
    application (writes a global or an enclosing function's variable, sets an attribute of
    something other than ctx, mutates a global or free container, prints or logs), judged from
    their bytecode (the code they call is not inspected), or None. Cached per class."""
    functions = [cls.forward, cls.backward if cls.backward is not Function.backward else cls.vjp]
    if cls.setup_context is not Function.setup_context:
        functions.append(cls.setup_context)
    functions = [inspect.unwrap(f) for f in functions]
    cached = cls.__dict__.get("_kiln_side_effect")
    if cached is not None and cached[0] == functions:
        return cached[1]
    reason = None
    for f in functions:
        code = getattr(f, "__code__", None)
        if code is not None:
            reason = reason or _code_side_effect(code, code.co_varnames[:1])
    setattr(cls, "_kiln_side_effect", (functions, reason))
    return reason


def _code_side_effect(code, ctx_names):
    where = f"{code.co_name} (line %d)"
    previous = []
    for ins in dis.get_instructions(code):
        op, name = ins.opname, ins.argval
        line = ins.positions.lineno if ins.positions else code.co_firstlineno
        if op in ("STORE_GLOBAL", "DELETE_GLOBAL"):
            return f"{where % line} writes the global {name!r}"
        if op in ("STORE_DEREF", "DELETE_DEREF") and name in code.co_freevars:
            return f"{where % line} writes the enclosing function's variable {name!r}"
        if op in ("LOAD_GLOBAL", "LOAD_NAME") and name == "print":
            return f"{where % line} calls print"
        outer = previous[-1] if previous else None
        if op in ("STORE_ATTR", "DELETE_ATTR") and not (
                outer is not None and outer.opname in ("LOAD_FAST", "LOAD_DEREF") and outer.argval in ctx_names):
            return f"{where % line} sets the attribute {name!r} of an object other than ctx"
        if op in ("LOAD_METHOD", "LOAD_ATTR") and name in _MUTATING_METHODS and outer is not None and (
                outer.opname in ("LOAD_GLOBAL", "LOAD_NAME") or
                (outer.opname == "LOAD_DEREF" and outer.argval in code.co_freevars)):
            return f"{where % line} calls {outer.argval}.{name}"
        if op in ("STORE_SUBSCR", "DELETE_SUBSCR") and len(previous) >= 2 and (
                previous[-2].opname in ("LOAD_GLOBAL", "LOAD_NAME") or
                (previous[-2].opname == "LOAD_DEREF" and previous[-2].argval in code.co_freevars)):
            return f"{where % line} writes an item of {previous[-2].argval}"
        previous = (previous + [ins])[-2:]
    for const in code.co_consts:
        if isinstance(const, types.CodeType):
            reason = _code_side_effect(const, ctx_names)
            if reason:
                return reason
    return None
