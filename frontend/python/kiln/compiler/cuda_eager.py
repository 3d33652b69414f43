"""Eager ops on CUDA tensors without a hand-written kernel per op (issue 18, item 3): an op the
CUDA dispatch key has no kernel for comes here (kiln._C._codegen._set_cuda_eager_handler, set
by kiln.cuda), is written as a one-node graph over its tensor arguments and compiled like any
captured graph on CUDA (inductor.compile_graph: retrace to prims -> loop program -> CUDA emitter
-> NVRTC), and the compiled program runs on the current stream.

Programs are cached per (op, the arguments' dtypes, sizes, strides and devices, the other
arguments' values): an op called again on tensors of the same layout runs at once. (Sizes are in
the key: a new size compiles anew; NVRTC's CUBINs also come from the kernel cache on disk. A
0-dim CPU tensor argument, such as the wrapped 2 of `x * 2`, is a constant of the program: a new
value compiles anew.) An
op whose decomposition does not lower (no prims decomposition, data-dependent output shapes,
ops that run eagerly between compiled segments) raises NotImplementedError naming it.
"""
import threading

from .. import _C
from ..fx import Graph, GraphModule
from ..fx.graph import type_of

_cache = {}
_busy = threading.local()


def _is_cpu_scalar(value):
    """A 0-dim CPU tensor among CUDA ones: a Python number the op call wrapped (x * 2), or a CPU
    scalar tensor, which PyTorch lets mix with CUDA tensors; it becomes a constant."""
    return isinstance(value, _C.TensorBase) and value.dim() == 0 and value.device.type == "cpu"


def _describe(value):
    if _is_cpu_scalar(value):
        return ("scalar", repr(value.item()))
    if isinstance(value, _C.TensorBase):
        return ("tensor", str(type_of(value)), tuple(value.stride()), value.storage_offset() == 0)
    if isinstance(value, (list, tuple)):
        return tuple(_describe(v) for v in value)
    return (type(value).__name__, repr(value))


def _graph(qualname, args, kwargs, num_returns):
    """The one-op graph: a placeholder per tensor argument (list elements included), the other
    arguments as constants; with the tensor arguments in placeholder order."""
    g = Graph()
    tensors = []

    def arg(value):
        if _is_cpu_scalar(value):
            return value.item()
        if isinstance(value, _C.TensorBase):
            tensors.append(value)
            return g.placeholder(f"t{len(tensors) - 1}", type_expr=type_of(value))
        if isinstance(value, list):
            return [arg(v) for v in value]
        return value

    node_args = tuple(arg(a) for a in args)
    node_kwargs = {k: arg(v) for k, v in kwargs.items()}
    node = g.call_function("aten." + qualname, node_args, node_kwargs)
    if num_returns == 1:
        g.output(node)
    else:
        g.output(tuple(g.call_function("operator.getitem", (node, i)) for i in range(num_returns)))
    return GraphModule({}, g), tensors


def _compile(qualname, args, kwargs, num_returns):
    from . import inductor
    from ..autograd import no_grad

    gm, tensors = _graph(qualname, args, kwargs, num_returns)
    try:
        with no_grad():
            run, attr_targets, kernel = inductor.compile_graph(gm, tensors)
    except Exception as error:  # noqa: BLE001 - any refusal of the pipeline is "no CUDA kernel"
        raise NotImplementedError(
            f"kiln.{qualname}: no CUDA kernel, and its decomposition does not compile for CUDA "
            f"({type(error).__name__}: {error})") from error
    if attr_targets:
        raise NotImplementedError(f"kiln.{qualname}: its CUDA program reads attributes")
    return run


def run(qualname, args, kwargs, num_returns):
    """The handler: the op's result on CUDA (a tensor, or a tuple of num_returns tensors)."""
    key = (qualname, num_returns, _describe(args), _describe(tuple(sorted(kwargs.items()))))
    _, tensors = _flatten(args, kwargs)
    devices = sorted({str(t.device) for t in tensors})
    if len(devices) > 1:
        raise RuntimeError(f"kiln.{qualname}: expected all tensors to be on the same device, but found "
                           f"at least two devices, {' and '.join(devices)}")
    fn = _cache.get(key)
    if fn is None:
        if getattr(_busy, "key", None) is not None:
            # Compiling an op must not need an eager CUDA op: that would compile without end.
            raise NotImplementedError(f"kiln.{qualname}: needed on CUDA while compiling "
                                      f"kiln.{_busy.key[0]} for CUDA")
        _busy.key = key
        try:
            fn = _compile(qualname, args, kwargs, num_returns)
        finally:
            _busy.key = None
        _cache[key] = fn
    from ..autograd import no_grad

    with no_grad():
        out = fn(*tensors)
    return out[0] if num_returns == 1 else tuple(out)


def _flatten(args, kwargs):
    tensors = []

    def walk(value):
        if isinstance(value, _C.TensorBase) and not _is_cpu_scalar(value):
            tensors.append(value)
        elif isinstance(value, list):
            for v in value:
                walk(v)

    for a in args:
        walk(a)
    for v in kwargs.values():
        walk(v)
    return None, tensors


def clear_cache():
    _cache.clear()
