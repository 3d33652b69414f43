"""Graph passes from Python: the C++ pass registry (passes/PassRegistry.def) by name, and
ShapeProp, which records each node's type by running the graph on real inputs.

    kiln.fx.passes.run(graph, "dce,cse,shape-prop")

The verifier runs after every pass; a failing pass raises RuntimeError naming it.
"""
from .. import _C
from .graph import type_of
from .graph_module import GraphModule
from .interpreter import Interpreter


def available():
    """(name, description) of every registered pass."""
    return [tuple(p) for p in _C._fx.passes()]


def run(graph, pipeline, print_after_all=False):
    """Runs the comma-separated passes on a Graph (or a GraphModule's graph, recompiling it after).

    Returns the graph after each pass as text when print_after_all is set, else None.
    """
    target = graph.graph if isinstance(graph, GraphModule) else graph
    log = target._run_passes(pipeline, print_after_all)
    if isinstance(graph, GraphModule):
        graph.recompile()
    return log if print_after_all else None


class ShapeProp(Interpreter):
    """Runs a GraphModule on example inputs and stores each value's type in node.meta["type"]
    (nodes whose values have no Type, such as dtypes, keep theirs)."""

    def run_node(self, n):
        result = super().run_node(n)
        if n.op != "output":
            t = type_of(result)
            if t is not None:
                n.meta["type"] = t
        return result

    def propagate(self, *args):
        return self.run(*args)
