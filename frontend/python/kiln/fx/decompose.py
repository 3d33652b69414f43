"""Retracing graphs to smaller op sets (the make_fx analogue over kiln.fx graphs).

    kiln.fx.retrace(gm_or_graph, "core_aten")

runs the graph's ops on fake tensors through the dispatcher (compiler/GraphTracer.h) and returns
the graph the tracer recorded, every node typed. The level picks the op set of the result:

- "aten": the ops as the graph calls them;
- "core_aten": every op that is neither core ATen nor a prim is replaced by its decomposition
  (recursively), so only core ATen ops and prims remain, plus ops that have no decomposition;
- "prims": every op that is not a prim is replaced by its decomposition (recursively).

Placeholders and get_attr nodes need tensor types with static sizes (captured graphs have them).
"""
from .. import _C
from .graph import Graph
from .graph_module import GraphModule

LEVELS = ("aten", "core_aten", "prims")


def retrace(graph, level="core_aten"):
    """A Graph (for a Graph) or a GraphModule with the same attributes (for a GraphModule)
    computing the same, retraced at `level` ("aten", "core_aten" or "prims")."""
    if isinstance(graph, GraphModule):
        return GraphModule(graph, retrace(graph.graph, level), class_name=type(graph).__name__)
    if not isinstance(graph, Graph):
        raise TypeError(f"retrace() expects a kiln.fx.Graph or GraphModule, got {type(graph).__name__}")
    if level not in LEVELS:
        raise ValueError(f"retrace(): unknown level {level!r} (expected one of {', '.join(LEVELS)})")
    return _C._fx.retrace(graph, level)
