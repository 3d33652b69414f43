"""AOT autograd: a captured graph that needs autograd (grad mode on, an input or a parameter
requiring grad) is compiled for training, as torch/_functorch/aot_autograd.py does:

    captured graph (get_attr parameters lifted to placeholders)
    -> joint graph: kiln._C._fx.trace_joint runs the forward on fake tensors with autograd on and
       then the backward engine from the outputs, recording both (compiler/GraphTracer.h)
    -> partition (partitioners.py: min-cut by default, or the default partitioner): the forward
       graph computes the outputs and the values the backward reads; the backward graph takes
       those and the outputs' gradients (tangents) and returns the inputs' gradients
    -> each graph compiled by the backend's compiler (inductor: C++; aot_eager: prims, eagerly)
    -> at each call, one autograd node (CompiledFunctionBackward) runs the compiled forward and,
       on backward, the compiled backward.

Before the joint trace the graph is functionalized (passes/Functionalize.h): in-place writes and
writes through views become values, and an input written in place gets one copy_ back at the end
of the forward. What is not handled yet raises AOTUnsupported, and the frame callback then runs
the graph op by op under the eager autograd engine (as before this module): writes the pass cannot
express that are not kept in order within one side of the partition, outputs that alias an input
written while it requires grad, non-tensor inputs. (New values of inputs that require grad are
extra outputs, copied into the inputs by the runtime wrapper.) A backward with create_graph=True through a compiled region
raises (no double backward).
"""
import concurrent.futures
import contextvars

from .. import _C, _logging
from .._C import _fx
from ..autograd.function import Function
from ..autograd.grad_mode import no_grad
from ..fx import Graph, GraphModule
from . import debug_dir, partitioners

_log = _logging.get_logger("aot")
_op_info = None
# Ops whose schema does not annotate what they write (as PyTorch's): argument positions.
_UNANNOTATED_WRITES = {"aten.native_batch_norm": (3, 4)}


class AOTUnsupported(RuntimeError):
    """A graph AOT autograd does not compile yet; it runs op by op under the autograd engine."""


def _ops():
    """Per graph target ("aten.add_.Tensor"): (its tags, positions of the arguments it writes)."""
    global _op_info
    if _op_info is None:
        _op_info = {"aten." + e["name"]: (frozenset(e["tags"]), tuple(e["mutated"])) for e in _C._op_table()}
        for target, written in _UNANNOTATED_WRITES.items():
            _op_info[target] = (_op_info[target][0], written)
    return _op_info


def _is_view(node):
    return node.op == "call_function" and "view" in _ops().get(str(node.target), ((), ()))[0]


def _written_arguments(node):
    if node.op != "call_function":
        return ()
    _, written = _ops().get(str(node.target), ((), ()))
    return tuple(node.args[i] for i in written if i < len(node.args) and hasattr(node.args[i], "op"))


def _storage_root(node):
    """The node owning the storage `node` views (through view ops)."""
    while _is_view(node) and node.args:
        node = node.args[0]
    return node


def _check_writes(joint, requires_grad, backward):
    """The in-place writes to keep in the forward (writes into inputs). Without functionalization
    a write is compiled in program order within one graph: it must write into an input that does
    not require grad (batch norm's running statistics) from the forward, or into a tensor made
    on its own side of the partition (a zero-filled gradient written through a slice in the
    backward). Anything else raises AOTUnsupported."""
    placeholders = [n for n in joint.nodes if n.op == "placeholder"]
    flags = dict(zip(placeholders, requires_grad))
    roots = []
    for node in joint.nodes:
        for arg in _written_arguments(node):
            root = _storage_root(arg)
            if root.op == "placeholder":
                ok = root in flags and not flags[root] and node not in backward
                if ok:
                    roots.append(node)
            else:
                ok = (root in backward) == (node in backward)
            if not ok:
                raise AOTUnsupported(f"{node.target} writes in place into %{arg.name} (storage of "
                                     f"%{root.name}) across the forward/backward partition or into an "
                                     "input that requires grad (no functionalization yet)")
    return roots


def _functionalized(graph, requires_grad):
    """(graph, written): `graph` traced at ATen level as the joint trace records it (composites
    decomposed, so that aliasing is explicit) and functionalized (passes/Functionalize.h):
    in-place writes become values, and an input written in place gets one copy_ of its final
    value at the end of the forward. An input that requires grad is not written by the graph:
    its new value becomes an extra output, and `written` lists those inputs' indices, in order
    (the runtime wrapper copies the values in, as PyTorch's does). A graph the pass cannot
    express (an op writing without a functional form) is returned as it was, with no written
    inputs: _check_writes then decides whether its writes can be kept in order."""
    aten = _fx.retrace(graph, "aten", True)
    differentiably_written = _inputs_written_under_grad_mode(aten)
    try:
        aten._run_passes("functionalize,dce")
    except RuntimeError as e:
        _log.info("graph not functionalized, its in-place writes are kept in order: %s", e)
        return graph, []
    _differentiate_no_grad_writes_as_inputs(aten, requires_grad, differentiably_written)
    written = _return_new_values_of_inputs_requiring_grad(aten, requires_grad)
    # The copy_ back into an input runs at the forward's end, before the joint trace runs the
    # backward: a backward formula that saved the input (a matmul with a buffer the step then
    # updates under no_grad, as a VQ codebook) would see it written (the engine's version
    # check). Its readers read a clone taken first, as _read_written_inputs_through_clones
    # makes them after the trace.
    copies = [n for n in aten.nodes if n.target == "aten.copy_" and n.args[0].op == "placeholder"]
    _read_written_inputs_through_clones(aten, copies)
    debug_dir.write("functional.txt", aten)
    return aten, written


def _grad_mode_of_nodes(graph):
    """{node: grad mode it runs under}: the joint trace starts with grad mode on and follows the
    graph's _set_grad_enabled nodes."""
    enabled, modes = True, {}
    for node in graph.nodes:
        if node.op == "call_function" and str(node.target) == "kiln._C._set_grad_enabled":
            enabled = bool(node.args[0])
        modes[node] = enabled
    return modes


def _inputs_written_under_grad_mode(graph):
    """The placeholders a node writes into (directly or through a view) while grad mode is on."""
    modes = _grad_mode_of_nodes(graph)
    return {_storage_root(arg) for node in graph.nodes if modes[node]
            for arg in _written_arguments(node) if _storage_root(arg).op == "placeholder"}


def _differentiate_no_grad_writes_as_inputs(graph, requires_grad, differentiably_written):
    """Eagerly, a write under no_grad into a tensor that requires grad (nn.Embedding's max_norm
    renorm of its weight) changes its data and keeps its autograd history: what reads the tensor
    afterwards, with grad mode on, differentiates into the tensor itself. Functionalized, those
    readers read a new value computed under no_grad, which would cut the gradient; they read
    aot.input_value(input, new value) instead: the new value, differentiated as the input (the
    joint trace, compiler/GraphTracer.h). Inputs also written with grad mode on are left alone."""
    placeholders = [n for n in graph.nodes if n.op == "placeholder"]
    modes = _grad_mode_of_nodes(graph)
    for i, target in enumerate(placeholders):
        if i >= len(requires_grad) or not requires_grad[i] or target in differentiably_written:
            continue
        copies = [n for n in target.users if n.target == "aten.copy_" and n.args[0] is target]
        if len(copies) != 1:
            continue
        values, node = [], copies[0].args[1]
        # The input's successive values: the chain of writes made under no_grad back to the input.
        while hasattr(node, "op") and node is not target and node.op == "call_function" and not modes[node]:
            values.append(node)
            node = node.args[0] if node.args else None
        for value in values:
            for user in [u for u in value.users if u.op == "call_function" and modes.get(u) and u is not copies[0]]:
                if value.type != target.type:
                    raise AOTUnsupported(f"{user.target} reads %{value.name}, a value of input %{target.name} "
                                         "written under no_grad, of another layout than the input's")
                with graph.inserting_before(user):
                    read = graph.call_function("aot.input_value", (target, value), type_expr=value.type)
                user.replace_input_with(value, read)


def _return_new_values_of_inputs_requiring_grad(graph, requires_grad):
    """The copy_ of a new value into an input that requires grad leaves the graph: the value is
    returned after the graph's outputs, and the input's other readers read a clone of it taken
    first (a partition saving the input itself would see the caller's write). The inputs'
    indices, in the order of the extra outputs."""
    placeholders = [n for n in graph.nodes if n.op == "placeholder"]
    index = {p: i for i, p in enumerate(placeholders)}
    copies = [n for n in graph.nodes if n.target == "aten.copy_" and n.args[0] in index
              and requires_grad[index[n.args[0]]]]
    if not copies:
        return []
    out = graph.output_node
    outputs = list(out.args[0]) if isinstance(out.args[0], (tuple, list)) else [out.args[0]]
    written = []
    for copy in copies:
        target, value = copy.args[0], copy.args[1]
        if copy.users:
            raise AOTUnsupported(f"the graph returns its input %{target.name} (or a view of it), "
                                 "written in place while it requires grad")
        graph.erase_node(copy)
        readers = list(target.users)
        if readers:
            with graph.inserting_after(placeholders[-1]):
                clone = graph.call_function("aten.clone", (target,), type_expr=target.type)
            for user in readers:
                user.replace_input_with(target, clone)
        outputs.append(value)
        written.append(index[target])
    out.args = (tuple(outputs),)
    return written


def _read_written_inputs_through_clones(joint, writes):
    """An input the forward writes into (the copy_ back at the end of a functionalized graph,
    batch norm's running statistics) holds its new value by the time the backward runs: its
    other readers read a clone taken before any write instead, so that a partition saving the
    input, or recomputing from it in the backward, gets the value the forward read. (Inputs
    written through a view are left alone: their views would then view the clone.) True when
    the graph changed."""
    writers, through_views = {}, set()
    for node in writes:
        for arg in _written_arguments(node):
            writers.setdefault(arg, set()).add(node)
            if _storage_root(arg) is not arg:
                through_views.add(_storage_root(arg))
    readers = {p: [u for u in p.users if u not in writers[p]] for p in joint.nodes
               if p.op == "placeholder" and p in writers and p not in through_views}
    written = [p for p, users in readers.items() if users]
    if not written:
        return False
    last = [n for n in joint.nodes if n.op == "placeholder"][-1]
    for p in written:
        with joint.inserting_after(last):
            clone = joint.call_function("aten.clone", (p,), type_expr=p.type)
        for user in readers[p]:
            user.replace_input_with(p, clone)
    return True


def _tangent_dependent(joint, num_tangents):
    """The backward side: the tangents, every node computed from one, and the nodes computed
    from no input at all (a zero-filled gradient, views of it) that only the backward uses."""
    nodes = list(joint.nodes)
    placeholders = [n for n in nodes if n.op == "placeholder"]
    backward = set(placeholders[len(placeholders) - num_tangents:])
    from_inputs = set(placeholders)
    written = set()  # storages a backward node wrote into: reading them reads the backward
    for node in nodes:
        if node.op == "call_function":
            if any(a in backward or _storage_root(a) in written for a in node.all_input_nodes):
                backward.add(node)
                written.update(_storage_root(a) for a in _written_arguments(node))
            if any(a in from_inputs for a in node.all_input_nodes):
                from_inputs.add(node)
    for node in reversed(nodes):
        if (node.op == "call_function" and node not in from_inputs and node.users
                and all(u in backward for u in node.users)):
            backward.add(node)
    return backward


class _Plan:
    """What a compiled training graph runs: the compiled forward and backward and how their
    inputs and outputs line up with the graph's."""

    def __init__(self, forward, backward, num_outputs, tangent_for, grad_inputs, saved_inputs,
                 num_inputs):
        self.forward, self.backward = forward, backward
        self.num_outputs, self.tangent_for = num_outputs, tangent_for
        self.grad_inputs, self.saved_inputs, self.num_inputs = grad_inputs, saved_inputs, num_inputs
        self.grad_present = None  # per grad input: the backward returns a gradient for it


def _function_class(plan):
    class CompiledFunction(Function):
        @staticmethod
        def forward(ctx, *args):
            results = plan.forward(*args)
            outputs = results[:plan.num_outputs]
            saved = [t if t.is_contiguous() else t.contiguous() for t in results[plan.num_outputs:]]
            ctx.save_for_backward(*[args[i] for i in plan.saved_inputs], *saved)
            ctx.mark_non_differentiable(*[o for o, t in zip(outputs, plan.tangent_for) if not t])
            return tuple(outputs)

        @staticmethod
        def backward(ctx, *grad_outputs):
            if _C.is_grad_enabled():
                raise RuntimeError(
                    "kiln.compile: backward with create_graph=True through a compiled region is not "
                    "supported (its backward is compiled code, not differentiable itself); run the "
                    "function uncompiled for double backward")
            # The backward is compiled for contiguous tangents (as AOT autograd makes them): the
            # gradient of a sum or a mean arrives expanded from a scalar (strides 0).
            tangents = [g if g.is_contiguous() else g.contiguous()
                        for g, t in zip(grad_outputs, plan.tangent_for) if t]
            grads = iter(plan.backward(*ctx.saved_tensors, *tangents))
            result = [None] * plan.num_inputs
            for i, present in zip(plan.grad_inputs, plan.grad_present):
                if present:
                    result[i] = next(grads)
            return tuple(result)

    return CompiledFunction


def _check_partitioner(partitioner):
    if partitioner not in partitioners.PARTITIONERS:
        raise ValueError(f"unknown partitioner {partitioner!r}: expected one of "
                         f"{sorted(partitioners.PARTITIONERS)}")


def partition_joint(joint, num_outputs, num_tangents, requires_grad, partitioner="min_cut", node_bytes=None):
    """The Partition (partitioners.py) of a joint graph: placeholders (the primals, then
    `num_tangents` tangents), output (the `num_outputs` forward outputs, then the gradients of
    the primals flagged in `requires_grad`, None where none reaches one). Raises AOTUnsupported
    for in-place writes the partition cannot keep in order. `node_bytes`: the cost of saving each
    node of the joint graph (in order, as the returned Partition's node_bytes) instead of its own
    bytes: the same graph traced at another size is cut where the first was (a ValueError when
    the graphs' nodes do not line up)."""
    _check_partitioner(partitioner)
    backward_side = _tangent_dependent(joint, num_tangents)
    writes = _check_writes(joint, requires_grad, backward_side)
    if _read_written_inputs_through_clones(joint, writes):
        backward_side = _tangent_dependent(joint, num_tangents)
    nodes = list(joint.nodes)
    weights = None
    if node_bytes is not None:
        if len(node_bytes) != len(nodes):
            raise ValueError(f"the joint graph has {len(nodes)} nodes, the one it is cut like {len(node_bytes)}")
        weights = dict(zip(nodes, node_bytes))
    info = partitioners.JointInfo(joint, num_outputs, num_tangents, backward_side, writes, _ops,
                                  _is_view, _storage_root, _written_arguments, weights)
    part = partitioners.PARTITIONERS[partitioner](info)
    part.node_bytes = [partitioners.nbytes(n) for n in nodes]
    return part


def _joint_graph(typed, example_inputs, attributes):
    """(joint graph, facts) of a captured graph whose placeholders and attributes are typed
    (`typed`): facts = (number of forward outputs, tangent_for, grad_inputs, requires_grad,
    number of inputs, attribute paths, written inputs)."""
    from .inductor import _lowerable_graph

    graph, placeholders, attr_targets = _lowerable_graph(typed)
    values = list(example_inputs) + [attributes[t] for t in attr_targets]
    if any(not isinstance(v, _C.TensorBase) for v in values) or len(values) != len(placeholders):
        raise AOTUnsupported("AOT autograd compiles graphs whose inputs are all tensors")
    requires_grad = [v.requires_grad for v in values]
    graph, written = _functionalized(graph, requires_grad)
    joint, num_outputs, tangent_for, grad_inputs = _fx.trace_joint(graph, requires_grad)
    # The engine sums a split's part gradients, each zeros with one slice written: one tensor
    # written in every slice instead (passes/MergeSliceWrites.h).
    joint._run_passes("merge-slice-writes")
    return joint, (num_outputs, tuple(tangent_for), tuple(grad_inputs), tuple(requires_grad), len(values),
                   tuple(attr_targets), tuple(written))


def _trace_and_partition(gm, example_inputs, attributes, partitioner):
    """(Partition, JointInfo-ish facts: the joint graph, number of forward outputs, tangent_for,
    grad_inputs, number of inputs, attribute paths)."""
    _check_partitioner(partitioner)
    from .inductor import _with_input_layouts

    joint, facts = _joint_graph(_with_input_layouts(gm, example_inputs), example_inputs, attributes)
    num_outputs, tangent_for, grad_inputs, requires_grad, num_values, attr_targets, written = facts
    debug_dir.write("joint.txt", joint)
    _log.debug("joint graph:\n%s", joint)
    part = partition_joint(joint, num_outputs, sum(tangent_for), requires_grad, partitioner)
    _log_partition(part, partitioner)
    grads = list(joint.output_node.args[0])[num_outputs:]
    return part, (num_outputs, list(tangent_for), list(grad_inputs), [g is not None for g in grads], num_values,
                  list(attr_targets), list(written))


def _log_partition(part, partitioner):
    debug_dir.write("forward.txt", part.forward)
    debug_dir.write("backward.txt", part.backward)
    _log.info("forward graph:\n%s\nbackward graph:\n%s", part.forward, part.backward)
    _log.info("saved for backward (%s partitioner): %d inputs, %d intermediates, %d bytes", partitioner,
              len(part.saved_inputs), part.num_saved, part.saved_bytes)


def _compile_both(part, compile_graph, compile_backward=None):
    """(compiled forward, compiled backward): the backward compiles in a second thread while the
    forward compiles in this one. Lowering and scheduling hold the GIL; the C++ compiler runs
    without it (KernelCache), so the two compilers run at once: a 1-layer GPT's cold
    forward + backward compile takes about the longer of the two instead of their sum.
    compile_graph(GraphModule) compiles the forward (and the backward, without
    compile_backward); a Partition `part` of None: the compilers take no argument."""
    def graph(which):
        return GraphModule({}, which) if part is not None else None

    def run(compile_one, g):
        return compile_one(g) if g is not None else compile_one()

    def backward():
        with debug_dir.stage("backward_"):
            return run(compile_backward or compile_graph, graph(part.backward if part else None))

    with concurrent.futures.ThreadPoolExecutor(max_workers=1) as pool:
        # The thread runs in a copy of this context: the debug folder of the graph being compiled.
        future = pool.submit(contextvars.copy_context().run, backward)
        try:
            with debug_dir.stage("forward_"):
                forward = run(compile_graph, graph(part.forward if part else None))
        finally:
            backward_result = future.exception() or future.result()
    if isinstance(backward_result, BaseException):
        raise backward_result
    return forward, backward_result


def compile_training(gm, example_inputs, attributes, compile_graph, partitioner="min_cut"):
    """The callable running `gm` (placeholders, then the attributes named by the returned paths)
    with a compiled forward and backward: (run, attribute paths). `attributes`: the tensors the
    get_attr nodes read (path -> tensor); compile_graph(GraphModule) -> callable returning a
    tuple; partitioner: "min_cut" or "default" (partitioners.py)."""
    part, facts = _trace_and_partition(gm, example_inputs, attributes, partitioner)
    compiled_forward, compiled_backward = _compile_both(part, compile_graph)
    return _training_runner(gm, part, facts, compiled_forward, compiled_backward)


def _training_runner(gm, part, facts, compiled_forward, compiled_backward):
    """(run, attribute paths) of compile_training: the autograd Function around the compiled
    forward and backward of `part`, and the runtime wrapper's copies into written inputs."""
    num_outputs, tangent_for, grad_inputs, grad_present, num_inputs, attr_targets, written = facts
    plan = _Plan(compiled_forward, compiled_backward, num_outputs, tangent_for, grad_inputs,
                 part.saved_inputs, num_inputs)
    plan.grad_present = grad_present
    function = _function_class(plan)
    apply = _apply_cutting_gradless_inputs(function, grad_inputs, grad_present)
    passthrough = _outputs_that_are_inputs(gm)
    if not written and not passthrough:
        return apply, attr_targets
    num_returned = num_outputs - len(written)
    differentiable = tangent_for[num_returned:]
    num_placeholders = sum(1 for n in gm.graph.nodes if n.op == "placeholder")

    def run(*args):
        if written and _written_input_shares_storage(args, written):
            # A written input is also another input (a resume function's stack slot holding a
            # local's tensor): the compiled forward writes it back only at its end, after the
            # reads through the other input; op by op, every read sees the write as eagerly.
            return gm.forward(*args[:num_placeholders])
        # New values of inputs that require grad, copied in as the eager program wrote them: under
        # autograd when the value requires grad (the input's history goes through the compiled
        # node), else as a write under no_grad.
        results = apply(*args)
        for i, value, grad in zip(written, results[num_returned:], differentiable):
            if grad:
                args[i].copy_(value)
            else:
                with no_grad():
                    args[i].copy_(value)
        results = results[:num_returned]
        if passthrough:
            results = tuple(args[passthrough[i]] if i in passthrough else r for i, r in enumerate(results))
        return results

    return run, attr_targets


def _written_input_shares_storage(args, written):
    storages = {}
    for i, a in enumerate(args):
        if hasattr(a, "_storage_id"):
            storages.setdefault(a._storage_id(), []).append(i)
    return any(len(storages.get(args[i]._storage_id(), ())) > 1 for i in written)


class _GraphsOverSymbols:
    """One side (forward or backward) of a training graph partitioned at each probe point of a
    dynamic.Traces, in the form inductor.compile_dynamic takes: the graph modules (the call's
    sizes first), the points, the symbols' names, and per symbol the (placeholder, dim) whose
    size it is at every point (None when no placeholder dim is that symbol)."""

    def __init__(self, graphs, points, names, signature):
        self.graph_modules = [GraphModule({}, g) for g in graphs]
        self.points, self.names, self.signature = points, names, signature
        self.symbolic_inputs = set()  # the placeholders are typed already: no example layouts
        self._dims = [None] * len(names)
        shapes = [[tuple(p.type.shape) if p.type is not None and p.type.kind == "tensor" else None
                   for p in g.placeholders()] for g in graphs]
        for k, first in enumerate(shapes[0]):
            for d in range(len(first or ())):
                values = [int(s[k][d]) if s[k] is not None and d < len(s[k]) else None for s in shapes]
                for i in range(len(names)):
                    if self._dims[i] is None and values == [p[i] for p in points]:
                        self._dims[i] = (k, d)

    def describe(self):
        return self.signature.describe()

    def symbol_dims(self):
        return list(self._dims)


def compile_training_dynamic(traces, example_inputs, attributes, partitioner="min_cut"):
    """compile_training over size symbols: `traces` (dynamic.Traces) holds the frame traced at
    the call's sizes and at the probe points; each trace gets its joint graph and partition (cut
    by the bytes at the call's sizes, so every probe saves the same values), and the forward
    graphs, then the backward graphs, are fitted over the symbols and compiled once each
    (inductor.compile_dynamic): the saved tensors' sizes are symbolic. Raises
    dynamic.DynamicUnsupported when the joint graphs or their partitions differ between the
    probes (the caller compiles for static sizes then); returns (run, attribute paths)."""
    from .dynamic import DynamicUnsupported
    from .inductor import _with_probe_layouts, compile_dynamic

    _check_partitioner(partitioner)
    parts, node_bytes, first_facts = [], None, None
    for j, gm in enumerate(traces.graph_modules):
        typed = _with_probe_layouts(gm, example_inputs, traces.symbolic_inputs)
        try:
            joint, facts = _joint_graph(typed, example_inputs, attributes)
            num_outputs, tangent_for, _, requires_grad, *_ = facts
            part = partition_joint(joint, num_outputs, sum(tangent_for), requires_grad, partitioner, node_bytes)
        except AOTUnsupported:
            raise
        except Exception as error:  # noqa: BLE001 - a probe the joint trace refuses: static sizes then
            raise DynamicUnsupported(f"the joint graph at sizes {traces.points[j]} does not trace: "
                                     f"{type(error).__name__}: {error}") from error
        grads = list(joint.output_node.args[0])[num_outputs:]
        facts = facts + (tuple(g is not None for g in grads), tuple(part.saved_inputs), part.num_saved)
        if j == 0:
            node_bytes, first_facts = part.node_bytes, facts
            debug_dir.write("joint.txt", joint)
            _log_partition(part, partitioner)
        elif facts != first_facts:
            raise DynamicUnsupported(f"the partition differs at sizes {traces.points[j]} (inputs, outputs, "
                                     "gradients or saved values)")
        parts.append(part)
    points, names = traces.points, traces.names
    forward = _GraphsOverSymbols([p.forward for p in parts], points, names, traces.signature)
    backward = _GraphsOverSymbols([p.backward for p in parts], points, names, traces.signature)
    _log.info("forward and backward over size symbols %s (%d probes)", traces.describe(), len(points) - 1)

    def compile_side(side):
        def compile_it():
            try:
                run, _ = compile_dynamic(side, ())
            except DynamicUnsupported:
                raise
            except Exception as error:  # noqa: BLE001 - e.g. a symbol no input dim binds
                raise DynamicUnsupported(f"{type(error).__name__}: {error}") from error
            return run
        return compile_it

    compiled_forward, compiled_backward = _compile_both(None, compile_side(forward), compile_side(backward))
    num_outputs, tangent_for, grad_inputs, _, num_values, attr_targets, written, grad_present = first_facts[:8]
    facts = (num_outputs, list(tangent_for), list(grad_inputs), list(grad_present), num_values,
             list(attr_targets), list(written))
    return _training_runner(traces.graph_modules[0], parts[0], facts, compiled_forward, compiled_backward)


def _apply_cutting_gradless_inputs(function, grad_inputs, grad_present):
    """function.apply, with the inputs that require grad but get no gradient from the backward
    (read only through detach(), or not at all) passed detached: an edge to their history would
    make the engine run it with no gradient, and a history already backpropagated (an RNN's
    hidden state detached at the top of the next compiled step) has freed its saved tensors
    ("backward through the graph a second time"). torch.compile connects no such edge either."""
    gradless = tuple(i for i, present in zip(grad_inputs, grad_present) if not present)
    if not gradless:
        return function.apply

    def apply(*args):
        if any(args[i].requires_grad for i in gradless):
            args = list(args)
            for i in gradless:
                args[i] = args[i].detach()
        return function.apply(*args)

    return apply


def _outputs_that_are_inputs(gm):
    """{output position: input position} for the outputs that are a placeholder itself. Eagerly
    `return lin(x), w` hands back w, the same object (an nn.Parameter stays one, a leaf stays a
    leaf, its grad accumulates in it); the autograd Function's output would be a new tensor with
    the compiled node as grad_fn, so those outputs are the inputs themselves (as AOTAutograd's
    OutputType.is_input)."""
    placeholders = {node: i for i, node in enumerate(gm.graph.placeholders())}
    outputs = [n for n in gm.graph.nodes if n.op == "output"]
    if not outputs:
        return {}
    values = outputs[0].args[0]
    if not isinstance(values, (tuple, list)):
        values = (values,)
    return {i: placeholders[v] for i, v in enumerate(values) if v in placeholders}


def plan_training(gm, example_inputs, attributes, partitioner="min_cut"):
    """What compile_training would build, not compiled: (forward loop program text, backward loop
    program text, Partition), for kiln.explain."""
    from .inductor import plan_kernels

    part, _ = _trace_and_partition(gm, example_inputs, attributes, partitioner)
    return plan_kernels(GraphModule({}, part.forward)), plan_kernels(GraphModule({}, part.backward)), part
