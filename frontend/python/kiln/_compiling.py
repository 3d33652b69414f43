"""kiln.compiler.is_compiling(): whether the calling code is being traced by kiln.compile
(torch.compiler.is_compiling's role). Here it answers False; the tracer answers True for a call
it traces (frontend/capture/Calls.cpp), so code can pick a traceable path (kiln.optim's Adam)."""
import contextlib


def is_compiling():
    """True while kiln.compile traces the calling code, False when it runs eagerly."""
    return False


class _RestoreGradMode:
    """The `__exit__` of a grad-mode `with` block (no_grad, enable_grad, set_grad_enabled) that a
    graph break cut: a resume function gets it on its stack where the block's exit was, and
    calling it (at the block's end, or from its exception handler with the exception's three
    values) switches grad mode back. The tracer reads the two instances below as the block's
    exit (frontend/capture), so the code after a break inside the block compiles too."""

    __slots__ = ("mode",)

    def __init__(self, mode):
        self.mode = mode

    def __call__(self, *exc_info):
        from . import _C

        _C._set_grad_enabled(self.mode)
        return False

    def __repr__(self):
        return f"<end of a grad-mode block: grad mode back to {self.mode}>"


RESTORE_GRAD_ENABLED = _RestoreGradMode(True)
RESTORE_GRAD_DISABLED = _RestoreGradMode(False)


class _RestoreAutocast:
    """The `__exit__` of a `with kiln.autocast(...)` block that a graph break cut, as
    _RestoreGradMode is for grad modes: calling it puts back the autocast state from before the
    block (`packed`: runtime/Autocast.h's packedState). The tracer reads it as the block's exit."""

    __slots__ = ("packed",)

    def __init__(self, packed):
        self.packed = packed

    def __call__(self, *exc_info):
        from . import _C

        _C._set_autocast_packed_state(self.packed)
        return False

    def __repr__(self):
        return "<end of an autocast block: the autocast state before it back>"


def float_input(value):
    """A Python float that a compiled graph takes as an input (an optimizer's lr that a scheduler
    changes at every step: frontend/capture's `dynamic_floats`), as the 0-d float64 tensor the
    graph was traced with. The glue calls it on the float at each call."""
    from . import _C

    return _C._ops.full([], value, dtype=_C.float64)


# Library functions whose frames kiln.compile captures even when eager code calls them, as
# TorchDynamo captures torch.optim's steps (kiln/compiler/skip_policy.py skips kiln's other
# frames): code object -> a function preparing a capture from the frame's arguments (None: none).
_captured_entries = {}


def capture_from_eager(fn, prepare=None):
    """Marks kiln library function `fn` (an optimizer's step) as captured when called from eager
    code under kiln.compile; `prepare(args)` runs before each trace of it with the frame's
    arguments (an optimizer making its state, as TorchDynamo runs `_init_group` for real)."""
    _captured_entries[fn.__code__] = prepare
    _graph_break_calls[fn.__code__] = ("an optimizer's step is a graph of its own (called from "
                                       "traced code: a graph break, as torch.optim's step)")
    return fn


# Library functions that traced code does not inline (a graph break at the call, the call made
# eagerly): code object -> the break's reason. An optimizer's step is a graph of its own, as
# torch.optim's `_use_grad` calls torch._dynamo.graph_break() before and after the step;
# `zero_grad` runs eagerly, as torch.optim's is `torch._disable_dynamo`.
_graph_break_calls = {}


def is_captured_entry(code):
    return code in _captured_entries


# The same, per function object: wrappers sharing one code object (kiln.manual_seed and
# kiln.seed are one wrapper's code) each have their own reason.
_graph_break_functions = {}


def not_traced(fn, reason):
    """Marks kiln library function `fn` as not traced when traced code calls it (`reason`): a
    graph break at the call, which runs between the graphs (an optimizer's zero_grad, kiln's
    global settings such as manual_seed or set_default_dtype, which traced would take effect
    once, at the trace, and not when the compiled code runs again)."""
    _graph_break_calls[fn.__code__] = reason
    _graph_break_functions[fn] = reason
    return fn


def graph_break_reason(code, fn=None):
    """Why traced code does not inline a call of `code` (function `fn` when known; None: it
    does)."""
    if fn is not None and fn in _graph_break_functions:
        return _graph_break_functions[fn]
    return _graph_break_calls.get(code)


# kiln.func's autograd steps (kiln/func/_autograd_steps.py), run for real on the fakes while
# tracing: the leaves requiring grad they make are a transform's own inputs, and the backward
# they run is recorded into the graph (frontend/capture/Tracer.cpp, callReal).
_transform_steps = set()


def transform_step(fn):
    """Marks kiln library function `fn` as one of a function transform's autograd steps."""
    _transform_steps.add(fn)
    return fn


def is_transform_step(fn):
    return fn in _transform_steps


def prepare_capture(code, args):
    prepare = _captured_entries.get(code)
    if prepare is not None:
        prepare(args)


_mode_independent = {}


def _names_training(code):
    if "training" in code.co_names:
        return True
    return any(isinstance(c, type(code)) and _names_training(c) for c in code.co_consts)


def mode_independent(cls):
    """Whether a module of class `cls` computes the same in training and in eval mode, as far as
    the tracer can tell: a kiln.nn class none of whose methods (below nn.Module, whose train()
    and eval() set the flag) reads `training`. kiln's modules run for real while tracing, so
    their reads of the flag are invisible to the tracer: their flag is guarded unless the class
    does not read it (TorchDynamo guards the flag where the traced code reads it; a Linear
    compiled in training mode serves eval mode too). User classes are always guarded."""
    known = _mode_independent.get(cls)
    if known is not None:
        return known
    from .nn import Module

    independent = True
    for klass in cls.__mro__:
        if klass is Module or klass is object:
            continue
        if not klass.__module__.startswith("kiln."):
            independent = False
            break
        for value in vars(klass).values():
            if isinstance(value, property):
                value = value.fget
            value = getattr(value, "__func__", value)
            code = getattr(value, "__code__", None)
            if code is not None and _names_training(code):
                independent = False
                break
        if not independent:
            break
    _mode_independent[cls] = independent
    return independent


def make_function(code, globals, defaults, kwdefaults, closure):
    """A function the traced code made (MAKE_FUNCTION), made again by a graph break's glue."""
    import types

    fn = types.FunctionType(code, globals, code.co_name, defaults or None, closure or None)
    fn.__qualname__ = code.co_qualname
    if kwdefaults:
        fn.__kwdefaults__ = dict(kwdefaults)
    return fn


def _cell(*value):
    import types

    return types.CellType(*value)


make_function.cell = _cell


def _writes(code, name, after=-1):
    import dis

    for ins in dis.get_instructions(code):
        if ins.offset // 2 > after and ins.opname in ("STORE_DEREF", "DELETE_DEREF") and ins.argval == name:
            return True
    return any(isinstance(c, type(code)) and _writes(c, name) for c in code.co_consts)


def cell_written(fn_code, frame_code, index, name):
    """Whether variable `name` of a closure is written by the function (`fn_code`) or by the
    traced frame (`frame_code`) after instruction `index` (a graph break's)."""
    return _writes(fn_code, name) or _writes(frame_code, name, index)


def is_library_module(obj):
    """Whether `obj` is an instance of one of kiln.nn's module classes."""
    from .nn import Module

    return isinstance(obj, Module) and type(obj).__module__.startswith("kiln.nn.")


def has_forward_hooks(module):
    """Whether a kiln.nn module has forward hooks: then its forward entered from eager code is
    captured (a graph of its own), as TorchDynamo's trace_rules allow an inbuilt module's forward
    with hooks (a hook may break the caller's graph, so the forward is traced alone). (Observed
    with torch 2.13: a Linear with only a forward pre-hook is not captured; one with a forward
    hook is.)"""
    return bool(module.__dict__.get("_forward_hooks"))


# The code of the function contextlib.contextmanager makes (one for every decorated generator
# function): traced code calling it makes a context manager the capture traces (Calls.cpp).
CONTEXTMANAGER_HELPER_CODE = contextlib.contextmanager(lambda: (yield)).__code__
