"""Backends: what turns a captured graph into the callable a cache entry runs.

A backend is `backend(gm, example_inputs) -> callable`, where gm is a kiln.fx.GraphModule and
example_inputs are the real tensors of the call that was traced; kiln.compile takes one by
registered name or any such callable.
"""
from .errors import InvalidBackend
# Imported with kiln, not at the first compile: an import inside the frame callback runs every
# frame of the import machinery through the capture hook (~5 ms instead of ~1 ms).
from .inductor import compile_inductor

_BACKENDS = {}


def register_backend(compiler_fn=None, name=None):
    """Registers `compiler_fn` under `name` (its __name__ by default); usable as a decorator."""
    if compiler_fn is None:
        return lambda fn: register_backend(fn, name)
    if not callable(compiler_fn):
        raise TypeError(f"a backend must be callable, got {type(compiler_fn).__name__}")
    name = name or compiler_fn.__name__
    if name in _BACKENDS and _BACKENDS[name] is not compiler_fn:
        raise ValueError(f"a kiln backend named {name!r} is already registered")
    _BACKENDS[name] = compiler_fn
    return compiler_fn


def list_backends():
    """The names of the registered backends, sorted."""
    return sorted(_BACKENDS)


def lookup_backend(backend):
    """The backend callable for a registered name or a callable."""
    if callable(backend):
        return backend
    if isinstance(backend, str) and backend in _BACKENDS:
        return _BACKENDS[backend]
    raise InvalidBackend(
        f"invalid backend {backend!r}: the registered backends are {list_backends()} "
        "(kiln.compiler.list_backends()); a callable backend(gm, example_inputs) is also accepted")


@register_backend
def eager(gm, example_inputs, **kwargs):
    """Runs the captured graph as it is: its generated Python code, op by op. `mode` and
    `options` of kiln.compile arrive as keyword arguments; eager has nothing to tune."""
    return gm.forward


@register_backend
def aot_eager(gm, example_inputs, **kwargs):
    """Retraces the captured graph to prims (kiln.fx.retrace: every op with a decomposition is
    decomposed, down to core ATen for ops whose prims decomposition is not written yet) and runs
    the result op by op, like eager. Inference only: nothing is traced for autograd."""
    from ..fx import retrace

    return retrace(gm, "prims").forward


@register_backend
def inductor(gm, example_inputs, **kwargs):
    """Lowers the captured graph to loop programs and compiles them to one shared object of C++
    (kiln.compiler.inductor); the compiled code runs the graph. Graphs it cannot compile raise,
    and the frame runs eagerly."""
    return compile_inductor(gm, example_inputs, **kwargs)


# Compiles graphs over size symbols (gm.kiln_dynamic): kiln.compile's dynamic shapes use it.
inductor.supports_dynamic_shapes = True
