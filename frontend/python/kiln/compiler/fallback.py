"""Fallback kernels: ops the loop IR cannot lower run eagerly between compiled segments.

An op left without a prims decomposition (gather, convolution, sort, scatter, ...) has no
lowering; before this, one of them sent its whole graph back to eager execution. Now the prims
graph is cut into compiled segments and eager steps, as Inductor calls its fallback kernels from
the wrapper code:

    segment 0 (compiled) -> the fallbacks whose inputs are ready -> segment 1 (compiled) -> ...

A lowerable node goes into the earliest segment after every value it reads is ready (a
segment's own values, or a fallback's that ran before it); a fallback runs right after the
segment that last feeds it, in program order among the fallbacks there. Nodes without inputs
(prims.full) are copied into each segment that reads them rather than passed between them.
Values crossing into a segment are made contiguous (each segment is compiled for contiguous
inputs there), except the results of float32 convolutions, which run channels-last and are read
in that layout (_channels_last_conv); the graph's own inputs keep their layouts.

In-place writes (prims.copy_to: batch norm's running statistics, `x.add_(1)`) stay in program
order only within one segment, so a graph is cut only when, for each written storage (an input
or an intermediate), the write, every view of that storage and every reader of those all land in
one segment, and fallbacks touch it only to read an intermediate after its last write (a slice's
gradient written into zeros, then read by convolution_backward: the segment before the fallback
finishes the storage). Where that fails for a storage made in the graph (a beam search writes each
step's topk choice into a token buffer the next step reads: its writes need several segments),
the storage's making, views and writes run as eager steps instead (real views and writes,
ordered by program order); otherwise plan() raises Uncuttable and the graph runs eagerly.
"""

import concurrent.futures
import contextvars

from ..fx import Graph, GraphModule
from ..fx.interpreter import Interpreter
from ..fx.graph import tensor_type
from .._C import complex64 as _complex64, complex128 as _complex128


class Uncuttable(ValueError):
    """A graph whose in-place writes cannot keep their order once cut into segments."""


_COMPLEX_DTYPES = (_complex64, _complex128)


# Prims the loop IR does not lower (an arbitrary strided window: the backward of a write through
# a view of an intermediate).
_UNLOWERED_PRIMS = frozenset({"prims.as_strided"})


# The nodes plan() runs eagerly although they lower: a written storage whose writes must fall
# into several segments (_plan_forcing_eager). Set only while plan() runs.
_forced_eager = contextvars.ContextVar("kiln_fallback_forced_eager", default=frozenset())


def is_fallback(node):
    """A call the loop IR has no lowering for: anything but a prims op or a lowered indexing op
    (below), and the prims above; or one plan() runs eagerly to keep a storage's writes in order."""
    if node.op != "call_function":
        return False
    if node in _forced_eager.get():
        return True
    if _touches_complex(node):
        return True
    target = str(node.target)
    if target.startswith("prims."):
        return target in _UNLOWERED_PRIMS
    if target in _INDEXING_OPS:
        return not _lowers_indexing(node)
    if target in _POOLING_OPS:
        return not _lowers_pooling(node)
    if target in _SCAN_OPS:
        return not _lowers_scan(node)
    if target == "operator.getitem" and node.args and hasattr(node.args[0], "op"):
        return is_fallback(node.args[0])
    return True


# Core ATen indexing ops the loop IR lowers directly (compiler/lowering/Indexing.cpp),
# with indirect loads and stores; the variants it does not take run eagerly (_lowers_indexing).
_INDEXING_OPS = frozenset({
    "aten.gather", "aten.index_select", "aten.embedding", "aten.index.Tensor", "aten.index_put",
    "aten.scatter.src", "aten.scatter.value", "aten.scatter_add", "aten.embedding_dense_backward",
})


# Scans the loop IR lowers directly as an extern scan (compiler/lowering/Indexing.cpp, lowerScan), over
# static or symbolic sizes.
_SCAN_OPS = frozenset({"aten.cumsum", "aten.cumprod"})


def _lowers_scan(node):
    """Numeric results; a bool result (dtype=bool) runs eagerly, whose kernel raises."""
    out = _tensor_type(node)
    return out is not None and out.dtype != _bool_dtype() and not getattr(out.dtype, "is_complex", False)


# Pooling ops the loop IR lowers directly (compiler/lowering/Pooling.cpp); their results
# are taken by getitem nodes, which lower with them.
_POOLING_OPS = frozenset({"aten.max_pool2d_with_indices", "aten.max_pool2d_with_indices_backward",
                          "aten.avg_pool2d", "aten._adaptive_avg_pool2d", "aten.avg_pool2d_backward",
                          "aten._adaptive_avg_pool2d_backward"})
# Most window taps an average pool is unrolled into (a global pool over a large image stays a
# fallback rather than one huge loop body).
_MAX_AVERAGED_TAPS = 64


def _lowers_pooling(node):
    """Static shapes, a 3-d or 4-d numeric input and a nonempty result (eager reports the rest);
    average pools in float32/float64 (eager sums half precision in float32) over at most
    _MAX_AVERAGED_TAPS taps, adaptive ones only where the input divides into the output."""
    if str(node.target) in ("aten.avg_pool2d_backward", "aten._adaptive_avg_pool2d_backward"):
        # As the forward over the same window (grad_output is the forward's output); eager raises
        # for mismatched dtypes.
        grad, self_t = _tensor_type(node.args[0]), _tensor_type(node.args[1])
        if grad is None or self_t is None or grad.dtype != self_t.dtype:
            return False
        return _lowers_avg_pool(node, self_t, grad, 2)
    if str(node.target) in ("aten.avg_pool2d", "aten._adaptive_avg_pool2d"):
        return _lowers_avg_pool(node, _tensor_type(node.args[0]), _tensor_type(node), 1)
    if str(node.target) == "aten.max_pool2d_with_indices_backward":
        grad, self_t, indices = (_tensor_type(a) for a in (node.args[0], node.args[1], node.args[7]))
        if not all(_static(t) for t in (grad, self_t, indices)) or not _integer(indices):
            return False
        if grad.dtype != self_t.dtype or grad.dtype not in _floating_dtypes():
            return False
        return len(self_t.shape) in (3, 4) and all(s > 0 for s in list(grad.shape) + list(self_t.shape))
    self_t = _tensor_type(node.args[0]) if node.args else None
    out = node.type.elements[0] if node.type is not None and node.type.kind == "tuple" else None
    if self_t is None or out is None or not _static(self_t) or not _static(out):
        return False
    if len(self_t.shape) not in (3, 4) or self_t.dtype == _bool_dtype():
        return False
    if getattr(self_t.dtype, "is_complex", False):
        return False
    return all(s > 0 for s in out.shape)


def _lowers_avg_pool(node, self_t, out, kernel_pos):
    """An average pool (or its backward, whose kernel_size is argument 2) over `self_t` to
    `out`: static, float32/float64, 3-d or 4-d, nonempty, at most _MAX_AVERAGED_TAPS taps;
    adaptive ones only where the input divides into the output."""
    if self_t is None or out is None or not _static(self_t) or not _static(out):
        return False
    if len(self_t.shape) not in (3, 4) or self_t.dtype not in _floating_dtypes()[:2]:
        return False
    if not all(s > 0 for s in list(self_t.shape) + list(out.shape)):
        return False
    if "adaptive" in str(node.target):
        ins, outs = self_t.shape[-2:], out.shape[-2:]
        if any(i % o for i, o in zip(ins, outs)):
            return False
        taps = (ins[0] // outs[0]) * (ins[1] // outs[1])
    else:
        k = node.args[kernel_pos] if len(node.args) > kernel_pos else node.kwargs.get("kernel_size")
        k = list(k) if isinstance(k, (list, tuple)) else [k]
        taps = k[0] * (k[1] if len(k) > 1 else k[0])
    return taps <= _MAX_AVERAGED_TAPS


def _touches_complex(node):
    """A call reading or making a complex tensor: the loop IR has no complex dtype, so these run
    eagerly (view_as_real / view_as_complex and views of complex inputs; the arithmetic itself
    was traced as real ops, docs/complex.md)."""
    # Called for every node of every graph plan() sees (twice per compiled graph): written for
    # speed, one type read per node and dtype tests by identity.
    complex_dtypes = _COMPLEX_DTYPES
    t = node.type
    if t is not None:
        kind = t.kind
        if kind == "tensor":
            if t.dtype in complex_dtypes:
                return True
        elif kind == "tuple":
            if any(e.kind == "tensor" and e.dtype in complex_dtypes for e in t.elements):
                return True
    for a in node.all_input_nodes:
        t = a.type
        if t is not None and t.kind == "tensor" and t.dtype in complex_dtypes:
            return True
    return False


def _tensor_type(a):
    t = getattr(a, "type", None) if hasattr(a, "op") else None
    return t if t is not None and t.kind == "tensor" else None


def _static(t):
    return t is not None and all(isinstance(s, int) for s in t.shape)


def _lowers_indexing(node):
    """Whether the lowering takes this indexing call: static shapes, integer index tensors (a
    boolean mask selects a data-dependent count), matching dtypes where eager requires them
    (eager raises its own error otherwise), and nonempty indexed dims (every index into an empty
    dim is an error eager reports)."""
    target = str(node.target)
    args = list(node.args)
    tensors = [_tensor_type(a) for a in node.all_input_nodes]
    if not all(_static(t) for t in tensors) or not _static(_tensor_type(node)):
        return False
    out = _tensor_type(node)
    if target == "aten.embedding_dense_backward":
        grad, indices = _tensor_type(args[0]), _tensor_type(args[1])
        scale = args[4] if len(args) > 4 else node.kwargs.get("scale_grad_by_freq", False)
        return scale is False and out.dtype == grad.dtype and not indices.dtype.is_floating_point             and indices.dtype != _bool_dtype() and len(out.shape) == 2 and out.shape[0] > 0
    self_t = _tensor_type(args[0])
    if self_t is None:
        return False
    if target == "aten.embedding":
        return len(self_t.shape) == 2 and self_t.shape[0] > 0 and _integer(_tensor_type(args[1]))
    if target in ("aten.index.Tensor", "aten.index_put"):
        indices = args[1]
        if not isinstance(indices, (list, tuple)) or len(indices) > len(self_t.shape):
            return False
        present = [(d, _tensor_type(i)) for d, i in enumerate(indices) if i is not None]
        if not present or not all(_integer(t) for _, t in present):
            return False
        if any(self_t.shape[d] == 0 for d, _ in present):
            return False
        if target == "aten.index_put":
            values = _tensor_type(args[2])
            accumulate = args[3] if len(args) > 3 else node.kwargs.get("accumulate", False)
            if values is None or values.dtype != self_t.dtype:
                return False
            if accumulate and self_t.dtype == _bool_dtype():
                return False
        return True
    # gather, index_select, scatter*: (self, dim, index, ...)
    dim = args[1] if len(args) > 1 else node.kwargs.get("dim")
    index = _tensor_type(args[2]) if len(args) > 2 else None
    if not isinstance(dim, int) or not _integer(index):
        return False
    rank = max(len(self_t.shape), 1)
    if not -rank <= dim < rank:
        return False
    size = self_t.shape[dim % rank] if self_t.shape else 1
    if size == 0:
        return False
    if target == "aten.scatter.src" and len(args) > 3 and isinstance(args[3], (int, float)) \
            and not isinstance(args[3], bool):
        pass  # a number source (the capture calls scatter.src with one): scatter.value
    elif target in ("aten.scatter.src", "aten.scatter_add"):
        src = _tensor_type(args[3]) if len(args) > 3 else None
        if src is None or src.dtype != self_t.dtype:
            return False
        # Eager requires index no larger than src (and self apart from dim); the lowering reads
        # src at index's positions, so it needs the same.
        if len(src.shape) != len(index.shape) or any(i > s for i, s in zip(index.shape, src.shape)):
            return False
    if target.startswith("aten.scatter") or target == "aten.gather":
        if len(index.shape) != len(self_t.shape):
            return False
        if any(i > s for d, (i, s) in enumerate(zip(index.shape, self_t.shape)) if d != dim % rank):
            return False
    if target == "aten.index_select" and len(index.shape) > 1:
        return False
    return True


def _integer(t):
    return t is not None and not t.dtype.is_floating_point and t.dtype != _bool_dtype() \
        and not getattr(t.dtype, "is_complex", False)


def _floating_dtypes():
    import kiln
    return (kiln.float32, kiln.float64, kiln.float16, kiln.bfloat16)


def _bool_dtype():
    from .. import bool as kiln_bool
    return kiln_bool


class _Step:
    """One step of the plan: a compiled segment or an eager fallback op.
    inputs: the original nodes whose values it takes (in its placeholders' order);
    outputs: the original nodes whose values it produces (in its outputs' order)."""

    def __init__(self, kind, graph, inputs, outputs):
        self.kind, self.graph, self.inputs, self.outputs = kind, graph, inputs, outputs
        self.run = None
        # Per input, the layout it is passed in ("contiguous", "channels_last", None: as it is);
        # None: all as they are.
        self.layouts = None


def _levels(nodes, after_writes=None):
    """Per fallback the segment it runs after (as early as its inputs allow); per lowerable node
    the segment it joins: as late as its users allow, so that views and broadcasts of the
    graph's inputs (a transposed weight, a bias) are read where they are used instead of being
    copied out of an earlier segment. after_writes: per node, the in-place writes before it in
    program order into a storage it touches (_writes_before), which it waits for as for an
    input: a fallback reading `zeros` after `zeros[:, 4:].copy_(v)` reads it once v is written,
    although its only input is the zeros node."""
    level = {}
    after_writes = after_writes or {}
    for node in nodes:
        if node.op in ("placeholder", "output"):
            continue
        lvl = 0
        for a in list(node.all_input_nodes) + after_writes.get(node, []):
            if a.op == "placeholder":
                continue
            # A fallback's value is ready for the segment after the one it runs after, and for
            # another fallback at once (it runs after it, in program order).
            lvl = max(lvl, level[a] + 1 if is_fallback(a) and not is_fallback(node) else level[a])
        level[node] = lvl
    top = max(level.values(), default=0)
    for node in reversed(nodes):
        if node not in level or is_fallback(node):
            continue
        # An output (or an unused node, such as an in-place write) is computed in the last
        # segment unless a user needs it earlier.
        levels = [level[u] for u in node.users if u.op != "output"]
        if len(levels) < len(node.users) or not levels:
            levels.append(top)
        level[node] = min(levels)
    # The results of a lowered op with several (max_pool2d's values and indices) are taken
    # apart in its segment: a tuple does not cross segments.
    for node in nodes:
        if node.target == "operator.getitem" and node in level and not is_fallback(node):
            level[node] = level[node.args[0]]
    return level


def _segment_graph(members, placeholders_of, extra_reads=(), passed=frozenset()):
    """A prims graph computing `members` (original nodes, in order) from placeholders for the
    values they (and the output, `extra_reads`) read from outside (placeholders_of: original
    node -> type to compile for; `passed`: constants read as values, not copied); returns
    (graph without its output node, the outside nodes read in placeholder order, the map from
    original nodes to the graph's)."""
    graph, env, inputs = Graph(), {}, []
    member_set = set(members)

    def value(a):
        if a in env:
            return env[a]
        if (a not in member_set and a.op != "placeholder" and not a.all_input_nodes and a not in passed
                and not is_fallback(a)):
            # A constant-like node (prims.full): copied, not passed in. Not one run eagerly (a
            # storage written in place through views, _plan_forcing_eager): its writes are in
            # the eager value, a copy would be the bare constant.
            env[a] = graph.node_copy(a, value)
            return env[a]
        inputs.append(a)
        env[a] = graph.placeholder(f"in_{len(inputs) - 1}_{a.name}", type_expr=placeholders_of(a))
        return env[a]

    for node in members:
        for a in node.all_input_nodes:
            if a not in member_set:
                value(a)
    for a in extra_reads:
        if a not in member_set:
            value(a)
    for node in members:
        env[node] = graph.node_copy(node, value)
    return graph, inputs, env


def _write_groups(nodes, views, writes):
    """Per in-place write: (the write, the written storage's root, the root with its views and
    the writes into them, every node touching that storage: the group and its readers)."""
    for w in nodes:
        if w.op != "call_function" or w.target not in writes:
            continue
        root = w.args[0]
        while root.op == "call_function" and root.target in views | writes:
            root = root.args[0]
        group, stack = set(), [root]
        while stack:  # the root, its views, writes into them and views of those
            node = stack.pop()
            if node in group:
                continue
            group.add(node)
            # (a view or write of this node: its first argument; copy_to's source is a read)
            stack.extend(u for u in node.users if u.target in views | writes and u.args[0] is node)
        touching = {u for g in group for u in g.users if u.op != "output"} | (group - {root})
        if root.op != "placeholder":
            touching.add(root)
        yield w, root, group, touching


def _writes_before(nodes, views, writes):
    """Per node touching a storage written in place, the writes into it that come before the
    node in program order (each write a lowerable or fallback node)."""
    order = {n: i for i, n in enumerate(nodes)}
    before = {}
    for w, _, group, touching in _write_groups(nodes, views, writes):
        for n in touching | group:
            if n is not w and n.op != "placeholder" and order[n] > order[w]:
                before.setdefault(n, []).append(w)
    return before


def _pull(node, lvl, level):
    """Moves a lowerable node, and the lowerable nodes it reads, into segment `lvl` or earlier
    (a node sits as late as its users allow; moving it earlier keeps its users after it).
    Returns False where a value it needs is a fallback's that is not ready before `lvl`."""
    stack = [node]
    while stack:
        n = stack.pop()
        if n.op == "placeholder" or level.get(n, -1) <= lvl and n is not node:
            continue
        if is_fallback(n):
            if level[n] >= lvl:
                return False
            continue
        level[n] = min(level[n], lvl)
        stack.extend(n.all_input_nodes)
        # A lowered op's results are taken apart in its segment: its getitems move with it.
        stack.extend(u for u in n.users if u.target == "operator.getitem" and level.get(u, -1) > lvl)
    return True


def _order_writes(w, root, group, touching, level, order, writes):
    """Places a written storage's nodes so that every read sees the writes before it: the root,
    its views, its writes and the reads that come before the last write (program order) in one
    segment; reads after the last write in that segment or later ones (a later segment takes
    the finished value), fallbacks among them included (a slice's gradient written into zeros,
    then read by convolution_backward). Where a fallback reads the storage after a write, the
    segment is the one before the first such fallback. Reads before the first write (of an
    input: `cache.sum()` or index_copy(cache, ...) before `cache.copy_(new)`) may run earlier:
    a lowered one in the writes' segment or before it, a fallback before it. Raises Uncuttable
    for what cannot be ordered: an input written while a fallback reads it after a write (the
    caller's tensor is written by compiled code only), a fallback view or write, a fallback
    reading between writes, a read needing a later value."""
    last_write = max(order[n] for n in group if n.target in writes)
    first_write = min(order[n] for n in group if n.target in writes)
    before = {n for n in touching if order[n] < last_write} | group
    early = {n for n in before - group if order[n] < first_write}
    fallbacks = {n for n in touching - early if is_fallback(n)}
    if fallbacks:
        bad = ", ".join(sorted({str(n.target) for n in fallbacks}))
        if root.op == "placeholder" or fallbacks & before:
            raise Uncuttable(f"{bad} reads storage the graph writes in place (%{w.name})")
        lvl = min(level[f] for f in fallbacks)
        if not all(_pull(n, lvl, level) for n in before if n.op != "placeholder"
                   and not (n in early and is_fallback(n))):
            raise Uncuttable(f"{bad} reads storage the graph writes in place (%{w.name}) before "
                             "a value it needs is ready")
    levels = {level[n] for n in before - early if n.op != "placeholder"}
    if len(levels) > 1 or any(level[n] < min(levels) for n in touching - before):
        raise Uncuttable(f"the in-place write %{w.name} and the reads of its storage would fall "
                         "into different segments")
    lvl = min(levels)
    for n in early:
        # (a fallback at level l runs after segment l, so before the writes' segment if l < lvl)
        ordered = level[n] < lvl if is_fallback(n) else level[n] <= lvl or _pull(n, lvl, level)
        if not ordered:
            raise Uncuttable(f"{n.target} reads storage the graph writes in place (%{w.name}) "
                             "before the write but cannot run before it")


def _check_writes(nodes, level, views, writes):
    """Orders each written storage's nodes into segments (_order_writes; views, writes: the
    targets of the view and in-place prims): moves nodes to earlier segments (level) or raises
    Uncuttable. Returns the written roots that are constants (prims.full): each is computed in
    one segment and passed on, not recreated in every segment that reads it."""
    order = {n: i for i, n in enumerate(nodes)}
    groups = list(_write_groups(nodes, views, writes))
    # Moving one storage's nodes may split another's: repeat until no node moves (nodes only
    # move to earlier segments, so this ends).
    while True:
        before = dict(level)
        for w, root, group, touching in groups:
            _order_writes(w, root, group, touching, level, order, writes)
        if level == before:
            break
    return {root for _, root, _, _ in groups if root.op != "placeholder" and not root.all_input_nodes}


def plan(graph, views=frozenset(), writes=frozenset()):
    """The steps computing `graph`'s outputs (a prims graph whose placeholders are the
    program's inputs); None when it has no fallback op. views and writes: the targets of the
    view prims and of the in-place prims (see _check_writes)."""
    nodes = list(graph.nodes)
    if not _any_fallback(nodes):
        return None
    try:
        level = _levels(nodes, _writes_before(nodes, views, writes))
        written_constants = _check_writes(nodes, level, views, writes)
    except Uncuttable:
        forced = _storages_run_eagerly(nodes, views, writes)
        if not forced:
            raise
        token = _forced_eager.set(frozenset(forced))
        try:
            return _plan_forcing_eager(graph, nodes, views, writes)
        finally:
            _forced_eager.reset(token)
    return _steps(graph, nodes, level, written_constants)


def _any_fallback(nodes):
    """any(is_fallback(n) for n in nodes), in one pass reading each node's type once (plan() runs
    twice on every graph compiled, of 10,000s of nodes for a large model): where no node has a
    complex type, only the calls of targets other than the lowered prims need is_fallback."""
    if _forced_eager.get():
        return any(is_fallback(n) for n in nodes)
    complex_dtypes = _COMPLEX_DTYPES
    for n in nodes:
        t = n.type
        if t is None:
            continue
        kind = t.kind
        if (kind == "tensor" and t.dtype in complex_dtypes) or (kind == "tuple" and any(
                e.kind == "tensor" and e.dtype in complex_dtypes for e in t.elements)):
            return any(is_fallback(n) for n in nodes)
    for n in nodes:
        if n.op == "call_function":
            target = str(n.target)
            if (not target.startswith("prims.") or target in _UNLOWERED_PRIMS) and is_fallback(n):
                return True
    return False


def _storages_run_eagerly(nodes, views, writes):
    """The nodes that make, view and write the intermediate storages written in place (their
    roots, views and writes), which _plan_forcing_eager runs as eager steps."""
    forced = set()
    for _, root, group, _ in _write_groups(nodes, views, writes):
        if root.op != "placeholder":
            forced |= group
    # (a result of a lowered op with several is taken apart in its segment: no tuple crosses)
    if any(n.target == "operator.getitem" and not is_fallback(n.args[0]) for n in forced):
        return set()
    return forced


def _plan_forcing_eager(graph, nodes, views, writes):
    """plan() where the storages' writes cannot stay in one segment (a beam search writing the
    tokens it chose into a buffer each step, each step's choice a fallback's): the intermediate
    storages' roots, views and writes run as eager steps (real views, real in-place writes),
    every step ordered after the writes before it and before the writes after it (program
    order); lowered reads of such a storage read it where the writes around them allow."""
    deps = _writes_before(nodes, views, writes)
    order = {n: i for i, n in enumerate(nodes)}
    groups = list(_write_groups(nodes, views, writes))
    for w, _, _, touching in groups:  # a write waits for the reads before it
        deps.setdefault(w, []).extend(n for n in touching if order[n] < order[w] and n is not w)
    level = _levels(nodes, deps)
    written_constants = set()  # forced-eager roots are passed to segments (_segment_graph)
    for w, root, group, touching in groups:
        if root.op == "placeholder":
            _order_writes(w, root, group, touching, level, order, writes)
            continue
        for r in touching - group:  # a lowered read before a write runs no later than its segment
            later = [level[x] for x in group if x.target in writes and order[x] > order[r]]
            if later and not is_fallback(r) and level[r] > min(later) and not _pull(r, min(later), level):
                raise Uncuttable(f"a read of storage the graph writes in place (%{w.name}) needs a "
                                 "value that is ready only after a later write")
    for w, root, group, touching in groups:
        if root.op != "placeholder" and not _program_ordered(w, touching | group, level, order):
            raise Uncuttable(f"the in-place write %{w.name} cannot keep its order among the reads "
                             "of its storage")
    return _steps(graph, nodes, level, written_constants)


def _program_ordered(w, touching, level, order):
    """Whether every node touching w's storage runs before w when it comes before it in program
    order, and after it otherwise (a fallback at level l runs after segment l; within a segment,
    and among the fallbacks of one level, program order holds)."""
    def position(n):
        return (level[n], 1 if is_fallback(n) else 0)

    return all(position(n) <= position(w) if order[n] < order[w] else position(n) >= position(w)
               for n in touching if n is not w and n.op != "placeholder")


def _steps(graph, nodes, level, written_constants):
    """The plan's steps: compiled segments and eager fallbacks by level (plan)."""
    fallbacks = [n for n in nodes if is_fallback(n)]
    # Constant-like nodes (no inputs) are copied into the segments that read them, unless
    # written in place.
    output_node = graph.output_node
    lowerable = [n for n in nodes if n.op == "call_function" and not is_fallback(n)
                 and (n.all_input_nodes or n in written_constants
                      or any(is_fallback(u) or u is output_node for u in n.users))]
    users = {n: list(n.users) for n in nodes}
    top = max(level[n] for n in lowerable + fallbacks)

    # Convolutions whose result only the program reads run channels-last (see _channels_last).
    channels_last = {n for n in fallbacks if _channels_last_conv(n)
                     and n not in output_node.all_input_nodes}

    def type_for(a):
        if a.op == "placeholder":
            return a.type
        t = a.type
        if a in channels_last:
            return tensor_type(t.dtype, t.shape, _channels_last_strides(t.shape), t.device)
        # (the device kept: a segment of a graph on CUDA compiles for CUDA)
        return tensor_type(t.dtype, t.shape, None, t.device) if t is not None and t.kind == "tensor" else t

    # The inputs of those convolutions that a segment computes, or that are the graph's inputs,
    # are written channels-last by the segment computing them (or the one before the
    # convolution): per segment level, the values to convert there.
    converted = {}
    for conv in sorted(channels_last, key=nodes.index):
        a = conv.args[0]
        if a.op == "placeholder" or not is_fallback(a):
            at = converted.setdefault(level[conv] if a.op == "placeholder" else level[a], [])
            if a not in at:
                at.append(a)
    read_converted = {c.args[0] for c in channels_last}

    def read_plain(n, member_set):
        """n's value is needed as it is outside its segment (by a user other than a
        channels-last convolution taking the converted copy, or as a graph output)."""
        return n in output_node.all_input_nodes or any(
            u not in member_set and not (u in channels_last and u.args[0] is n and n in read_converted)
            for u in users[n])

    steps = []
    for lvl in range(top + 1):
        members = [n for n in lowerable if level[n] == lvl]
        convert = converted.get(lvl, [])
        if members or convert:
            seg_graph, inputs, env = _segment_graph(members, type_for, convert, written_constants)
            member_set = set(members)
            outputs = [n for n in members if read_plain(n, member_set)]
            results = [env[n] for n in outputs]
            for a in convert:
                results.append(_channels_last_copy(seg_graph, env[a], a.type))
                outputs.append(_ChannelsLast(a))
            seg_graph.output(tuple(results))
            step = _Step("compiled", seg_graph, inputs, outputs)
            step.layouts = [None if a.op == "placeholder" else
                            "channels_last" if a in channels_last else "contiguous" for a in inputs]
            steps.append(step)
        for node in fallbacks:
            if level[node] != lvl:
                continue
            g, env, inputs = Graph(), {}, []

            def value(a, g=g, env=env, inputs=inputs):
                if a not in env:
                    inputs.append(a)
                    env[a] = g.placeholder(f"in_{len(inputs) - 1}_{a.name}", type_expr=a.type)
                return env[a]

            for a in node.all_input_nodes:
                value(a)
            copy = g.node_copy(node, value)
            g.output((copy,))
            step = _Step("eager", g, inputs, [node])
            if node in channels_last:
                step.layouts = ["channels_last" if a is node.args[0] else None for a in inputs]
            steps.append(step)
    return steps


def _storage_start(t):
    return t.data_ptr() - t.storage_offset() * t.element_size()


def input_relative_offset(t, offset, inputs):
    """as_strided's storage offset for tensor `t` at run time. A graph is traced with every
    input's storage starting at its data (the tracer's fakes have storage offset 0: diagonal()
    of an input records offset 0), so as_strided of (a view of) an input that is a slice of a
    bigger tensor (data[4:8]) adds that input's storage offset to the traced one; as_strided of
    an intermediate keeps it."""
    if not isinstance(offset, int) or not hasattr(t, "data_ptr") or not t.numel():
        return offset
    start = _storage_start(t)
    for a in inputs:
        if hasattr(a, "data_ptr") and a.storage_offset() and a.numel() and _storage_start(a) == start:
            return offset + a.storage_offset()
    return offset


class InputRelativeViews(Interpreter):
    """Runs a graph of view prims of its placeholders on real inputs with as_strided offsets
    relative to the inputs (input_relative_offset); a callable as GraphModule.forward is."""

    def __init__(self, graph):
        super().__init__(None, graph=graph)
        self.inputs = ()

    def __call__(self, *args):
        return self.run_with_inputs(args, args)

    def run_with_inputs(self, args, inputs):
        """Runs on `args`, offsets relative to `inputs` (the program's, when this graph is one
        step of a partitioned program)."""
        self.inputs = inputs
        try:
            return self.run(*args)
        finally:
            self.inputs = ()

    def call_function(self, target, args, kwargs):
        if str(target) == "prims.as_strided" and len(args) == 4 and not kwargs:
            t, size, stride, offset = args
            return t.as_strided(size, stride, input_relative_offset(t, offset, self.inputs))
        return super().call_function(target, args, kwargs)


# A float32 2-d convolution (oneDNN's) reads and writes NHWC without reorders, and its NCHW
# result would cost a reorder as large as the result itself (small_cnn large: 4.9 ms of the
# first convolution's 6.2). So a convolution whose result only the compiled segments read gets
# its input channels-last (eager kiln then returns its result channels-last, as PyTorch does)
# and the segments read that layout through their input strides.
def _channels_last_conv(node):
    if str(node.target) != "aten.convolution" or len(node.args) < 7 or node.args[6] is not False:
        return False
    x, out = _tensor_type(node.args[0]), _tensor_type(node)
    return (x is not None and out is not None and _static(x) and _static(out) and len(x.shape) == 4
            and x.dtype == _float32() and x.shape[1] > 1 and out.shape[1] > 1
            and x.shape[2] * x.shape[3] > 1 and out.shape[2] * out.shape[3] > 1)


class _ChannelsLast:
    """The key of a value's channels-last copy (made by a segment) among the plan's values."""

    def __init__(self, node):
        self.node = node

    def __eq__(self, other):
        return isinstance(other, _ChannelsLast) and other.node is self.node

    def __hash__(self):
        return hash(("channels_last", self.node))


def _channels_last_copy(graph, value, t):
    """Nodes of `graph` computing value's [n, h, w, c] copy (contiguous): the segment's output,
    permuted back to [n, c, h, w] when the program runs."""
    n, c, h, w = t.shape
    nhwc = tensor_type(t.dtype, [n, h, w, c], None, t.device)
    moved = graph.call_function("prims.transpose", (value, [0, 2, 3, 1]), type_expr=nhwc)
    return graph.call_function("prims.clone", (moved,), type_expr=nhwc)


def _channels_last_strides(shape):
    n, c, h, w = shape
    return [c * h * w, 1, w * c, c]


def _float32():
    import kiln
    return kiln.float32


def _laid_out(value, layout):
    """value in `layout` ("contiguous", "channels_last" or None: as it is), copied if needed."""
    if layout == "contiguous":
        return value if value.is_contiguous() else value.contiguous()
    if layout == "channels_last" and list(value.stride()) != _channels_last_strides(value.shape):
        return value.permute(0, 2, 3, 1).contiguous().permute(0, 3, 1, 2)
    return value


class PartitionedProgram:
    """Runs the steps of `plan(graph)`: compiled segments (compile_segment(prims graph) gives a
    callable returning the outputs' tuple) and eager fallbacks, then returns the graph's outputs
    as a tuple. `fallbacks` names the eager ops; `segments` holds each segment's loop program
    (text, None for one without a program) for kiln.explain and debugging. `link`, when given,
    takes the list of compile_segment's (run, program) pairs in program order and returns it
    completed: a backend compiling the segments' code together finishes there what
    compile_segment prepared."""

    def __init__(self, graph, steps, compile_segment, link=None):
        self.placeholders = list(graph.placeholders())
        outs = graph.output_node.args[0]
        self.results = list(outs) if isinstance(outs, (tuple, list)) else [outs]
        self.steps = steps
        self.fallbacks = [str(s.outputs[0].target) for s in steps if s.kind == "eager"]
        compiled = [s for s in steps if s.kind == "compiled"]
        # Segments compile two at a time: their C++ compilers run at once (the GIL is released
        # while one runs), each thread in a copy of this context (the debug folder's stage).
        with concurrent.futures.ThreadPoolExecutor(max_workers=2) as pool:
            futures = [pool.submit(contextvars.copy_context().run, compile_segment, s.graph)
                       for s in compiled]
            results = [f.result() for f in futures]
        if link is not None:
            results = link(results)
        self.segments = []
        for step, (run, program) in zip(compiled, results):
            step.run = run
            self.segments.append(program)
        for step in steps:
            if step.kind != "compiled":
                step.run = GraphModule({}, step.graph).forward
                if str(step.outputs[0].target) == "prims.as_strided":
                    step.run = InputRelativeViews(step.graph)

    def __call__(self, *args):
        env = dict(zip(self.placeholders, args))
        for step in self.steps:
            if step.layouts is None:
                ins = [env[a] for a in step.inputs]
            else:  # a channels-last copy a segment made is taken as it is where that layout is
                # wanted; elsewhere (a graph input a later segment reads as it came) the value itself
                ins = [_laid_out(env[_ChannelsLast(a)] if layout == "channels_last" and _ChannelsLast(a) in env
                                 else env[a], layout)
                       for a, layout in zip(step.inputs, step.layouts)]
            if isinstance(step.run, InputRelativeViews):  # offsets relative to the program's inputs
                run = lambda *ins, step=step: step.run.run_with_inputs(ins, args)  # noqa: E731
            else:
                run = step.run
            for node, value in zip(step.outputs, run(*ins)):
                env[node] = value.permute(0, 3, 1, 2) if isinstance(node, _ChannelsLast) else value
        return tuple(env[r] for r in self.results)
