"""One-node graphs calling one op overload, their decomposition (kiln.fx.retrace) and the op-set
checks on the result: shared by test_decompositions.py and tools/decomp_report.py."""
import functools

import kiln
from kiln import fx

LEVELS = ("core_aten", "prims")


def op_graph(target, args, kwargs):
    """(graph, inputs): a graph whose placeholders take the tensors found in args / kwargs (in
    order, `inputs`) and whose one call_function node calls `target` on them; it returns the
    node's result. Other values are constants of the node."""
    g = fx.Graph()
    inputs = []

    def lift(v):
        if isinstance(v, kiln.Tensor):
            node = g.placeholder(f"arg{len(inputs)}", type_expr=fx.type_of(v))
            inputs.append(v)
            return node
        if isinstance(v, (list, tuple)):
            return type(v)(lift(x) for x in v)
        return v

    a = tuple(lift(x) for x in args)
    k = {n: lift(v) for n, v in kwargs.items()}
    node = g.call_function(target, a, k)
    g.output(node)
    return g, inputs


def run_graph(graph, inputs):
    return fx.GraphModule({}, graph)(*inputs)


def retrace_available():
    return hasattr(fx, "retrace")


def retrace(graph, level):
    return fx.retrace(graph, level)


def call_targets(graph):
    return [n.target for n in graph.nodes if n.op == "call_function"]


@functools.lru_cache(maxsize=None)
def _tags_by_schema():
    return {e["schema"]: tuple(e["tags"]) for e in kiln._C._op_table()}


@functools.lru_cache(maxsize=None)
def target_tags(target):
    """The op table's tags of an op target ("aten.add.Tensor", "prims.add"); None for targets
    that are not ops of the table (operator.getitem, ...)."""
    try:
        schema = kiln._C._fx.op_schema(target)
    except Exception:  # noqa: BLE001 - any target the table does not know
        return None
    return _tags_by_schema().get(schema["schema"], ())


def is_core(target):
    return "core" in (target_tags(target) or ())


def is_prim(target):
    return "prims" in (target_tags(target) or ())


def kept_at(target, level):
    """Whether retrace keeps the op at `level`: prims always, core ops at 'core_aten'."""
    return is_prim(target) or (level == "core_aten" and is_core(target))


def in_level(target, level):
    """Whether the op belongs to the op set of `level`: core ATen ops, or prims."""
    return is_core(target) if level == "core_aten" else is_prim(target)


def _is_input_mutation(node):
    """`aten.copy_` into a placeholder: how a decomposed in-place op writes its result back to
    the graph input it mutates (functional ops, then the copy), as in PyTorch's functionalized
    graphs; it is part of every level."""
    return (node.target == "aten.copy_" and bool(node.args)
            and getattr(node.args[0], "op", None) == "placeholder")


def outside_level(graph, level):
    """The op targets of `graph` outside the op set of `level` (core ATen at 'core_aten', prims
    at 'prims'); call targets that are not table ops (operator.getitem) and input mutations do
    not count."""
    return [n.target for n in graph.nodes
            if n.op == "call_function" and target_tags(n.target) is not None
            and not in_level(n.target, level) and not _is_input_mutation(n)]
