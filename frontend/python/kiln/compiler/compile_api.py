"""kiln.compile, kiln.explain, kiln.compiler.disable and reset: the entry points that put
functions and modules under the frame hook (kiln._C._capture.CompiledFunction)."""
from .. import _C
from ..nn.modules.module import Module
from .backends import lookup_backend
from .explain import ExplainRecorder
from .frame_callback import FrameCallback, reset_state
from .hook import capture_module, check_capture_supported
from .optimized_module import OptimizedModule


def _wrap(fn, callback):
    if isinstance(fn, Module):
        return OptimizedModule(fn, callback)
    if not callable(fn):
        raise TypeError(f"kiln.compile expects a callable or a kiln.nn.Module, got {type(fn).__name__}")
    return capture_module().CompiledFunction(fn, callback)


def compile(fn=None, *, backend="inductor", fullgraph=False, dynamic=None, mode=None, options=None):
    """Compiles `fn` (a function or a kiln.nn.Module) so that its calls run captured graphs.

    Used as a function or as a decorator, with or without arguments. Each call of the result
    checks the guards of the graphs captured so far and runs the first that matches; a miss
    traces the call into a new graph and compiles it with `backend` (a name from
    list_backends(), by default "inductor": generated C++, or a callable
    `backend(gm, example_inputs) -> callable`). A frame the
    tracer cannot capture runs eagerly, or raises kiln.compiler.Unsupported with
    fullgraph=True. `mode` and `options` go to the backend as keyword arguments (one of the
    two at most, as in torch). `dynamic` (backends that compile over size symbols, such as
    inductor; docs/dynamic-shapes.md): None (default) compiles for the first call's sizes and,
    when a call with other sizes recompiles, makes the dims that changed symbolic, so one graph
    serves later sizes; True makes every input dim symbolic from the first call; False always
    compiles for static sizes (a new shape compiles a new graph, up to
    kiln.config.recompile_limit). Sizes 0 and 1 are never symbolic.
    """
    if dynamic not in (None, True, False):
        raise TypeError(f"kiln.compile: dynamic must be None, True or False, got {dynamic!r}")
    if mode is not None and options is not None:
        raise RuntimeError(
            "Either mode or options can be specified, but both can't be specified at the same time.")
    if backend == "inductor":
        from .inductor import check_mode
        check_mode(mode)
    backend_fn = lookup_backend(backend)
    backend_kwargs = {}
    if mode is not None:
        backend_kwargs["mode"] = mode
    if options is not None:
        backend_kwargs["options"] = options
    # On a Python kiln cannot capture, the compiled function runs `fn` as kiln.compiler.disable does.
    callback = (FrameCallback(backend_fn, fullgraph=fullgraph, backend_kwargs=backend_kwargs, dynamic=dynamic)
                if check_capture_supported(fullgraph) else None)
    if fn is None:
        return lambda f: _wrap(f, callback)
    return _wrap(fn, callback)


def disable(fn=None):
    """Runs `fn` without capture, also inside compiled functions (a decorator, too)."""
    if fn is None:
        return disable
    if not callable(fn):
        raise TypeError(f"kiln.compiler.disable expects a callable, got {type(fn).__name__}")
    return capture_module().CompiledFunction(fn, None)


def reset():
    """Forgets every compiled graph, cache entry and skip decision: the next calls trace again."""
    capture = getattr(_C, "_capture", None)
    if capture is not None:
        capture.reset()
    reset_state()


def explain(fn):
    """`kiln.explain(fn)(*args, **kwargs)` runs fn once under capture with the eager backend
    and returns an ExplainOutput: the graphs, ops, guards and break reasons. Like
    torch._dynamo.explain it resets the compile caches before and after. Inputs marked with
    kiln.compiler.mark_dynamic are probed as a compile would: dynamic_per_graph gives each
    graph's symbolic inputs (`x: f32[s0, 64]`), though the eager backend runs the graph at the
    call's sizes."""

    def run(*args, **kwargs):
        recorder = ExplainRecorder()
        compiled = _wrap(fn, FrameCallback(lookup_backend("eager"), recorder=recorder, describe_dynamic=True))
        reset()
        try:
            compiled(*args, **kwargs)
        finally:
            reset()
        return recorder.output()

    return run
