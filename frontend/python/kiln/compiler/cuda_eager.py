"""Eager ops on CUDA tensors without a hand-written kernel per op (issue 18, item 3): an op the
CUDA dispatch key has no kernel for comes here (kiln._C._codegen._set_cuda_eager_handler, set
by kiln.cuda), is written as a one-node graph over its tensor arguments and compiled like any
captured graph on CUDA (inductor: retrace to prims -> loop program -> CUDA emitter -> NVRTC),
and the compiled program runs on the current stream.

Programs are cached per (op, the arguments' dtypes, devices and layout classes, the other
arguments' values), not per size: a tensor argument that is contiguous or channels-last (4-d)
has its dims compiled as size symbols (dynamic.py's machinery: the one-op graph traced at probe
sizes, fitted into one program over s0, s1, ...), so `x.sigmoid()` compiles once for every 2-d
contiguous float tensor. What the key keeps of the sizes: the rank, the dims of size 0 or 1
(specialized, as broadcasting depends on them), which dims have equal sizes (duck sizing: one
symbol), a channels-last tensor's channel count, whether the storage offset is 0, and the guarded
range (a size past it compiles again, over a wider one). A tensor of any other layout (a
transposed or sliced view) is part of the key with its exact sizes and strides, as is every
tensor of an op whose graph is not one program over the symbols (an argument that depends on the
sizes, a view whose sizes do: `KILN_LOGS=dynamic` says why); those compile per size (NVRTC's
CUBINs also come from the kernel cache on disk). A 0-dim CPU tensor argument, such as the
wrapped 2 of `x * 2`, is a constant of the program: a new value compiles anew.

An op with no CUDA program (no prims decomposition, data-dependent output shapes, a
decomposition needing the op itself as a fallback) runs on the host: its CUDA tensors are copied
to the CPU, the CPU kernel runs, the results are copied back (in the layout they have, so a
channels-last convolution result stays channels-last) and so are the inputs it wrote (an
in-place op: found by their version counters). A UserWarning names the op and why, once per op
and process, as PyTorch's MPS fallback warns. With kiln.config.cuda_host_fallback = False it
raises NotImplementedError naming the op instead. The same path serves the fallback steps of a
graph compiled for CUDA (inductor: its compiled segments run on the GPU, the eager ops between
them dispatch here).
"""
import threading
import warnings

from .. import _C
from .._logging import get_logger
from ..fx import Graph, GraphModule
from ..fx.graph import tensor_type, type_of
from . import dynamic

_cache = {}      # the layout key -> _Program
_by_sizes = {}   # the exact key -> the program, for layout keys that compile per size
_no_program = {}  # the exact key -> the NotImplementedError of an op that has no CUDA program
_warned = set()  # the ops that ran on the host (warned once each)
_busy = threading.local()
_dynamic_log = get_logger("dynamic")


class _Program:
    """The cache entry of a layout key: the program over its size symbols and the largest size
    a symbol may take (its guarded range), or `run` None where the op compiles per size."""

    def __init__(self, run, max_size=0):
        self.run, self.max_size = run, max_size


def _target(qualname):
    """The graph target of the op the handler names: "prims.sum" as it is, "add.Tensor" is aten's."""
    return qualname if qualname.startswith("prims.") else "aten." + qualname


def _is_cpu_scalar(value):
    """A 0-dim CPU tensor among CUDA ones: a Python number the op call wrapped (x * 2), or a CPU
    scalar tensor, which PyTorch lets mix with CUDA tensors; it becomes a constant."""
    return isinstance(value, _C.TensorBase) and value.dim() == 0 and value.device.type == "cpu"


def _channels_last_strides(shape):
    n, c, h, w = shape
    return (h * w * c, 1, w * c, c)


def layout_class(t):
    """"contiguous", "channels_last" (4-d, NHWC in memory) or "other" (any other strides)."""
    if t.is_contiguous():
        return "contiguous"
    if t.dim() == 4 and tuple(t.stride()) == _channels_last_strides(tuple(t.shape)):
        return "channels_last"
    return "other"


def _symbolic_dims(t, constants):
    """The dims of tensor `t` that may be size symbols: none of an "other" layout, nor dims of
    size 0 or 1, nor the channels of a channels-last tensor (its strides are then polynomials of
    degree 2 in the symbols, which the fit allows), nor dims whose size is one of the op's
    integer arguments (`constants`: layer_norm's normalized_shape, a view's sizes: the graph
    would hold at that size only)."""
    cls = layout_class(t)
    if cls == "other":
        return set()
    return {d for d, size in enumerate(t.shape)
            if size >= 2 and size not in constants and not (cls == "channels_last" and d == 1)}


class _Describer:
    """The cache keys of one call: `exact` (sizes and strides) and `layout` (the sizes of the
    symbolic dims replaced by their duck-sizing class: the first dim of each size seen names it)."""

    def __init__(self, constants):
        self.classes, self.constants = {}, constants

    def __call__(self, value, exact):
        if _is_cpu_scalar(value):
            return ("scalar", repr(value.item()))
        if isinstance(value, _C.TensorBase):
            if exact or layout_class(value) == "other":
                return ("tensor", str(type_of(value)), tuple(value.stride()), value.storage_offset() == 0)
            symbolic = _symbolic_dims(value, self.constants)
            dims = tuple(f"s{self.classes.setdefault(size, len(self.classes))}" if d in symbolic else size
                         for d, size in enumerate(value.shape))
            return ("tensor", str(value.dtype), str(value.device), layout_class(value), dims,
                    value.storage_offset() == 0)
        if isinstance(value, (list, tuple)):
            return tuple(self(v, exact) for v in value)
        return (type(value).__name__, repr(value))


def _key(qualname, num_returns, args, kwargs, exact):
    describe = _Describer(_constant_ints(args, _constant_ints(kwargs, set())))
    return (qualname, num_returns, describe(args, exact), describe(tuple(sorted(kwargs.items())), exact))


def _graph(qualname, args, kwargs, num_returns, type_for=None):
    """The one-op graph: a placeholder per tensor argument (list elements included), the other
    arguments as constants; with the tensor arguments in placeholder order. `type_for(i, t)`:
    the type of the i-th tensor's placeholder (default: its own)."""
    g = Graph()
    tensors = []

    def arg(value):
        if _is_cpu_scalar(value):
            return value.item()
        if isinstance(value, _C.TensorBase):
            i = len(tensors)
            tensors.append(value)
            return g.placeholder(f"t{i}", type_expr=type_for(i, value) if type_for else type_of(value))
        if isinstance(value, list):
            return [arg(v) for v in value]
        return value

    node_args = tuple(arg(a) for a in args)
    node_kwargs = {k: arg(v) for k, v in kwargs.items()}
    node = g.call_function(_target(qualname), node_args, node_kwargs)
    if num_returns == 1:
        g.output(node)
    else:
        g.output(tuple(g.call_function("operator.getitem", (node, i)) for i in range(num_returns)))
    return GraphModule({}, g), tensors


def _unsupported(qualname, error):
    return NotImplementedError(f"kiln.{qualname}: no CUDA kernel, and its decomposition does not compile "
                               f"for CUDA ({type(error).__name__}: {error})")


def _compile(qualname, args, kwargs, num_returns):
    """The program for the call's exact sizes and strides."""
    from . import inductor
    from ..autograd import no_grad

    gm, tensors = _graph(qualname, args, kwargs, num_returns)
    try:
        with no_grad():
            run, attr_targets, kernel = inductor.compile_graph(gm, tensors)
    except Exception as error:  # noqa: BLE001 - any refusal of the pipeline is "no CUDA kernel"
        raise _unsupported(qualname, error) from error
    _refuse_calling_itself(qualname, kernel)
    if attr_targets:
        raise NotImplementedError(f"kiln.{qualname}: its CUDA program reads attributes")
    return run


def _refuse_calling_itself(qualname, kernel):
    """NotImplementedError when the program `kernel` runs the op itself as a fallback: it would
    run eagerly on CUDA, that is come back here."""
    from . import fallback

    if isinstance(kernel, fallback.PartitionedProgram) and _target(qualname) in kernel.fallbacks:
        raise NotImplementedError(f"kiln.{qualname}: no CUDA kernel, and it has no decomposition "
                                  f"into ops that compile for CUDA")


def _signature(tensors, constants):
    """The dynamic.Signature of the call: its tensors' symbolic dims (t0, t1, ... in placeholder
    order), equal sizes sharing a symbol; None when it has none, or more than dynamic allows."""
    examples = {f"t{i}": t for i, t in enumerate(tensors)}
    dims, hints, by_size = {}, [], {}
    for expr, t in examples.items():
        symbolic = _symbolic_dims(t, constants)
        ids = []
        for d, size in enumerate(t.shape):
            if d in symbolic:
                ids.append(by_size.setdefault(size, len(hints)))
                if ids[-1] == len(hints):
                    hints.append(size)
            else:
                ids.append(-1)
        if symbolic:
            dims[expr] = ids
    if not hints or len(hints) > dynamic.MAX_SYMBOLS:
        return None, examples
    max_size = max([dynamic.MIN_MAX_SIZE] + [4 * h for h in hints])
    return dynamic.Signature(dims, hints, max_size), examples


def _probe_type(t, sizes):
    """Tensor `t`'s type at other sizes, in its layout class."""
    stride = _channels_last_strides(sizes) if layout_class(t) == "channels_last" else None
    return tensor_type(t.dtype, sizes, stride, t.device)


def _constant_ints(value, out):
    """The ints among the non-tensor arguments (a probe must not make a size equal one: see
    dynamic.probe_points)."""
    if isinstance(value, bool) or _is_cpu_scalar(value):
        return out
    if isinstance(value, int):
        out.add(abs(value))
    elif isinstance(value, (list, tuple)):
        for v in value:
            _constant_ints(v, out)
    elif isinstance(value, dict):
        for v in value.values():
            _constant_ints(v, out)
    return out


def _compile_symbolic(qualname, args, kwargs, num_returns):
    """_Program over the call's size symbols: the one-op graph traced at the call's sizes and at
    dynamic's probe points, which must be one graph over the symbols (inductor.compile_dynamic);
    a _Program with no run where they are not (the op compiles per size)."""
    from . import inductor
    from ..autograd import no_grad

    _, tensors = _flatten(args, kwargs)
    constants = _constant_ints(args, _constant_ints(kwargs, set()))
    sig, examples = _signature(tensors, constants)
    if sig is None:
        return _Program(None)
    try:
        avoid = set(constants)
        for expr, t in examples.items():
            avoid |= {s for s, i in zip(t.shape, sig.dims.get(expr, [-1] * t.dim())) if i < 0}
        points = [tuple(sig.hints)] + dynamic.probe_points(sig, avoid)
        graph_modules = []
        for point in points:
            sizes = sig.sizes_at(point, examples)

            def type_for(i, t, sizes=sizes):
                expr = f"t{i}"
                return _probe_type(t, sizes[expr]) if expr in sizes else type_of(t)

            graph_modules.append(_graph(qualname, args, kwargs, num_returns, type_for)[0])
        positions = {i for i in range(len(tensors)) if f"t{i}" in sig.dims}
        traces = dynamic.Traces(sig, {"inputs": list(examples)}, None, points, graph_modules, positions)
        with no_grad():
            run, attr_targets = inductor.compile_dynamic(traces, tensors)
        _refuse_calling_itself(qualname, getattr(run, "kernel", run))
    except Exception as error:  # noqa: BLE001 - not one program over the symbols: per size then
        _dynamic_log.info("CUDA eager kiln.%s: compiled per size, not over %s (%s: %s)", qualname,
                          sig.describe(), type(error).__name__, error)
        return _Program(None)
    if attr_targets:
        return _Program(None)
    _dynamic_log.info("CUDA eager kiln.%s: one program over %s, 2 <= s <= %d", qualname,
                      sig.describe(), sig.max_size)
    return _Program(run, sig.max_size)


def _program_for(qualname, args, kwargs, num_returns):
    """The cached program running this call, compiled if there is none."""
    key = _key(qualname, num_returns, args, kwargs, exact=False)
    entry = _cache.get(key)
    if entry is not None and entry.run is not None:
        _, tensors = _flatten(args, kwargs)
        if all(max(t.shape, default=0) <= entry.max_size for t in tensors):
            return entry.run
        entry = None  # a size past the guarded range: compiled again, over a wider one
    if entry is None:
        entry = _cache[key] = _guarded_compile(key, _compile_symbolic, qualname, args, kwargs, num_returns)
        if entry.run is not None:
            return entry.run
    exact = _key(qualname, num_returns, args, kwargs, exact=True)
    run = _by_sizes.get(exact)
    if run is None:
        if exact in _no_program:
            raise _no_program[exact]
        try:
            run = _by_sizes[exact] = _guarded_compile(exact, _compile, qualname, args, kwargs, num_returns)
        except NotImplementedError as error:
            if getattr(_busy, "key", None) is None:  # (not the guard against compiling while compiling)
                _no_program[exact] = error
            raise
    return run


def _guarded_compile(key, compile_fn, qualname, args, kwargs, num_returns):
    if getattr(_busy, "key", None) is not None:
        # Compiling an op must not need an eager CUDA op: that would compile without end.
        raise NotImplementedError(f"kiln.{qualname}: needed on CUDA while compiling "
                                  f"kiln.{_busy.key[0]} for CUDA")
    _busy.key = key
    try:
        return compile_fn(qualname, args, kwargs, num_returns)
    finally:
        _busy.key = None


def run(qualname, args, kwargs, num_returns):
    """The handler: the op's result on CUDA (a tensor, or a tuple of num_returns tensors)."""
    _, tensors = _flatten(args, kwargs)
    devices = sorted({str(t.device) for t in tensors})
    if len(devices) > 1:
        raise RuntimeError(f"kiln.{qualname}: expected all tensors to be on the same device, but found "
                           f"at least two devices, {' and '.join(devices)}")
    from .. import config
    from ..autograd import no_grad

    try:
        fn = _program_for(qualname, args, kwargs, num_returns)
    except NotImplementedError as error:
        if not config.cuda_host_fallback or getattr(_busy, "key", None) is not None:
            raise
        return _on_host(qualname, args, kwargs, num_returns, tensors[0].device, error)
    running = _busy.__dict__.setdefault("running", set())
    if fn in running:
        # Its program runs the op itself eagerly (an eager view graph of a view the CUDA key has
        # no kernel for, a random op its program draws eagerly): that would recurse without end.
        error = NotImplementedError(f"kiln.{qualname}: no CUDA kernel, and its generated program calls it again")
        if not config.cuda_host_fallback:
            raise error
        return _on_host(qualname, args, kwargs, num_returns, tensors[0].device, error)
    running.add(fn)
    try:
        with no_grad():
            out = fn(*tensors)
    finally:
        running.discard(fn)
    return out[0] if num_returns == 1 else tuple(out)


def _on_host(qualname, args, kwargs, num_returns, device, why):
    """The op run by its CPU kernel on host copies of its CUDA tensors: the results copied to
    `device`, and the inputs it wrote copied back (see the module docstring)."""
    from ..autograd import no_grad
    from ..fx.targets import resolve

    if qualname not in _warned:
        _warned.add(qualname)
        warnings.warn(f"{why}: it runs on the CPU, its tensors copied there and back (this may have "
                      f"performance implications; kiln.config.cuda_host_fallback = False makes it an "
                      f"error)", UserWarning, stacklevel=4)
    copies = []  # (device tensor, its host copy, the copy's version before the op)

    def to_host(value):
        if isinstance(value, _C.TensorBase) and value.device.type == "cuda":
            host = value.cpu()
            copies.append((value, host, host._version))
            return host
        if isinstance(value, (list, tuple)):
            return type(value)(to_host(v) for v in value)
        return value

    host_args = tuple(to_host(a) for a in args)
    host_kwargs = {k: to_host(v) for k, v in kwargs.items()}
    with no_grad():
        out = resolve(_target(qualname))(*host_args, **host_kwargs)
        for tensor, host, version in copies:
            if host._version != version:
                tensor.copy_(host)
        outs = (out,) if num_returns == 1 else tuple(out)
        results = tuple(_to_device(o, device, copies) for o in outs)
    return results[0] if num_returns == 1 else results


def _to_device(host, device, copies):
    """A host result on `device`: the device tensor it is the host copy of (an in-place op's
    result), else a copy in the same layout when that is dense (one transfer), else contiguous.
    Results that are not tensors (allclose's bool, the None of a gradient not asked for) are
    returned as they are."""
    if not isinstance(host, _C.TensorBase):
        return host
    for tensor, copy, _ in copies:
        if host._is_same(copy):
            return tensor
    if host.is_contiguous() or layout_class(host) == "channels_last":
        out = _C._ops.empty_strided(host.shape, host.stride(), dtype=host.dtype, device=device)
        return out.copy_(host)
    return host.to(device)


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
    _by_sizes.clear()
    _no_program.clear()
