"""AOT autograd: a captured graph that needs autograd (grad mode on, an input or a parameter
requiring grad) is compiled for training, as torch/_functorch/aot_autograd.py does:

    captured graph (get_attr parameters lifted to placeholders)
    -> joint graph: kiln._C._fx.trace_joint runs the forward on fake tensors with autograd on and
       then the backward engine from the outputs, recording both (compiler/GraphTracer.h)
    -> partition (default partitioner): the forward graph computes the outputs and the values the
       backward reads; the backward graph takes those and the outputs' gradients (tangents) and
       returns the inputs' gradients
    -> each graph compiled by the backend's compiler (inductor: C++; aot_eager: prims, eagerly)
    -> at each call, one autograd node (CompiledFunctionBackward) runs the compiled forward and,
       on backward, the compiled backward.

What is not handled yet raises AOTUnsupported, and the frame callback then runs the graph op by
op under the eager autograd engine (as before this module): in-place writes other than into
inputs that do not require grad (functionalization is not written yet), non-tensor inputs. A
backward with create_graph=True through a compiled region raises (no double backward).
"""
from .. import _C, _logging
from .._C import _fx
from ..autograd.function import Function
from ..fx import Graph, GraphModule
from ..fx.graph import tensor_type
from . import debug_dir

_log = _logging.get_logger("aot")
_op_info = None
# Ops whose schema does not annotate what they write (as PyTorch's): argument positions.
_UNANNOTATED_WRITES = {"aten.native_batch_norm": (3, 4)}


class AOTUnsupported(RuntimeError):
    """A graph AOT autograd does not compile yet; it runs op by op under the autograd engine."""


def _ops():
    """Per graph target ("aten.add_.Tensor"): (is a view, positions of the arguments it writes)."""
    global _op_info
    if _op_info is None:
        _op_info = {}
        for e in _C._op_table():
            params = e["schema"][e["schema"].index("(") + 1:e["schema"].rindex(") ->")]
            written = tuple(i for i, p in enumerate(_split_params(params)) if "!)" in p)
            _op_info["aten." + e["name"]] = ("view" in e["tags"], written)
        for target, written in _UNANNOTATED_WRITES.items():
            _op_info[target] = (_op_info[target][0], written)
    return _op_info


def _split_params(text):
    parts, depth, current = [], 0, ""
    for ch in text:
        if ch in "([":
            depth += 1
        elif ch in ")]":
            depth -= 1
        if ch == "," and depth == 0:
            parts.append(current)
            current = ""
        else:
            current += ch
    return parts + [current] if current.strip() else parts


def _written_arguments(node):
    if node.op != "call_function":
        return ()
    _, written = _ops().get(str(node.target), (False, ()))
    return tuple(node.args[i] for i in written if i < len(node.args) and hasattr(node.args[i], "op"))


def _storage_root(node):
    """The node owning the storage `node` views (through view ops)."""
    while node.op == "call_function" and _ops().get(str(node.target), (False, ()))[0] and node.args:
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


def _partition(joint, num_forward_outputs, num_tangents, backward, writes):
    """The default partitioner: (forward graph, backward graph, saved placeholders' indices,
    number of saved intermediates). The forward returns its outputs then the intermediates the
    backward reads; the backward takes the saved inputs, the saved intermediates and the
    tangents, and returns the gradients that are not None."""
    nodes = list(joint.nodes)
    placeholders = [n for n in nodes if n.op == "placeholder"]
    primals, tangents = placeholders[:len(placeholders) - num_tangents], placeholders[len(placeholders) - num_tangents:]
    outputs = list(joint.output_node.args[0])
    forward_outputs, grads = outputs[:num_forward_outputs], outputs[num_forward_outputs:]
    # The writes into each storage: reading a value needs the writes into its storage before it
    # (a gradient assembled by copies into slices of a zero-filled tensor).
    writers = {}
    for node in nodes:
        for arg in _written_arguments(node):
            writers.setdefault(_storage_root(arg), []).append(node)

    def inputs_of(node):
        return list(node.all_input_nodes) + writers.get(_storage_root(node), [])

    # Views of inputs (a transposed weight) are recomputed in the backward from the input rather
    # than saved: they cost nothing there, and a saved view would be a copy.
    backward = set(backward)
    for node in nodes:
        if node.op != "call_function" or node in backward or not any(u in backward for u in node.users):
            continue
        chain, root = [], node
        while root.op == "call_function" and _ops().get(str(root.target), (False, ()))[0]:
            chain.append(root)
            root = root.args[0]
        if root.op == "placeholder" and chain and not writers.get(root):
            backward.update(chain)

    needed = set()
    stack = [g for g in grads if g is not None]
    while stack:
        node = stack.pop()
        if node in needed:
            continue
        needed.add(node)
        if node in backward:
            stack.extend(inputs_of(node))
    # Forward values the backward reads (a gradient that depends on no tangent counts too).
    saved = [n for n in nodes if n in needed and n not in backward]
    saved_inputs = [n for n in saved if n.op == "placeholder"]
    saved_values = [n for n in saved if n.op != "placeholder"]

    forward = Graph()
    env = {p: forward.placeholder(p.name, type_expr=p.type) for p in primals}
    in_forward, stack = set(), list(forward_outputs) + saved_values + writes
    while stack:
        node = stack.pop()
        if node in in_forward or not hasattr(node, "op"):
            continue
        in_forward.add(node)
        stack.extend(inputs_of(node))
    for node in nodes:
        if node in in_forward and node.op == "call_function":
            env[node] = forward.node_copy(node, lambda a: env[a])
    forward.output(tuple(env[n] for n in forward_outputs + saved_values))

    backward_graph = Graph()
    env = {}
    contiguous = set(saved_values)  # the forward hands them over contiguous (_function_class)
    for n in saved_inputs + saved_values + tangents:
        t = n.type
        if n in contiguous and t is not None and t.kind == "tensor":
            t = tensor_type(t.dtype, t.shape, device=t.device)
        env[n] = backward_graph.placeholder(n.name, type_expr=t)
    for node in nodes:
        if node in needed and node in backward and node.op == "call_function":
            env[node] = backward_graph.node_copy(node, lambda a: env[a])
    backward_graph.output(tuple(env[g] for g in grads if g is not None))
    return forward, backward_graph, [primals.index(p) for p in saved_inputs], len(saved_values)


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
            tangents = [g for g, t in zip(grad_outputs, plan.tangent_for) if t]
            grads = iter(plan.backward(*ctx.saved_tensors, *tangents))
            result = [None] * plan.num_inputs
            for i, present in zip(plan.grad_inputs, plan.grad_present):
                if present:
                    result[i] = next(grads)
            return tuple(result)

    return CompiledFunction


def compile_training(gm, example_inputs, attributes, compile_graph):
    """The callable running `gm` (placeholders, then the attributes named by the returned paths)
    with a compiled forward and backward: (run, attribute paths). `attributes`: the tensors the
    get_attr nodes read (path -> tensor); compile_graph(GraphModule) -> callable returning a
    tuple."""
    from .inductor import _lowerable_graph, _with_input_layouts

    typed = _with_input_layouts(gm, example_inputs)
    graph, placeholders, attr_targets = _lowerable_graph(typed)
    values = list(example_inputs) + [attributes[t] for t in attr_targets]
    if any(not isinstance(v, _C.TensorBase) for v in values) or len(values) != len(placeholders):
        raise AOTUnsupported("AOT autograd compiles graphs whose inputs are all tensors")
    requires_grad = [v.requires_grad for v in values]
    joint, num_outputs, tangent_for, grad_inputs = _fx.trace_joint(graph, requires_grad)
    debug_dir.write("joint.txt", joint)
    _log.debug("joint graph:\n%s", joint)
    backward_side = _tangent_dependent(joint, sum(tangent_for))
    writes = _check_writes(joint, requires_grad, backward_side)
    forward, backward, saved_inputs, num_saved = _partition(joint, num_outputs, sum(tangent_for),
                                                            backward_side, writes)
    debug_dir.write("forward.txt", forward)
    debug_dir.write("backward.txt", backward)
    _log.info("forward graph:\n%s\nbackward graph:\n%s", forward, backward)
    _log.info("saved for backward: %d inputs, %d intermediates", len(saved_inputs), num_saved)

    with debug_dir.stage("forward_"):
        compiled_forward = compile_graph(GraphModule({}, forward))
    with debug_dir.stage("backward_"):
        compiled_backward = compile_graph(GraphModule({}, backward))
    plan = _Plan(compiled_forward, compiled_backward, num_outputs, tangent_for, grad_inputs,
                 saved_inputs, len(values))
    grads = list(joint.output_node.args[0])[num_outputs:]
    plan.grad_present = [g is not None for g in grads]
    function = _function_class(plan)

    def run(*args):
        return function.apply(*args)

    return run, attr_targets
