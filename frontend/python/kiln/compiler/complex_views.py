"""Complex round trips folded out of a prims graph before the inductor backend plans it.

Complex ops reach the compiler already rewritten into real ops on view_as_real views
(runtime/complex, docs/complex.md), so their graphs chain view_as_complex and view_as_real:
the forward's `view_as_real(view_as_complex(x) * w)` becomes `view_as_complex(stack(...))`
followed by `view_as_real`, and a backward turns each view round the other way. Nodes that touch
complex values run eagerly between compiled segments (fallback.py), and every such node cuts the
graph. A round trip is a view of x with x's own geometry, so it is x itself: folding it leaves
only the complex values the graph really has (complex inputs and outputs, and their views) as
eager steps, and the real arithmetic between them compiles as one segment."""

_INVERSE = {"aten.view_as_real": "aten.view_as_complex", "aten.view_as_complex": "aten.view_as_real"}


def fold_complex_round_trips(graph):
    """Replaces view_as_real(view_as_complex(x)) and view_as_complex(view_as_real(z)) by x and z
    in `graph` (edited in place); returns how many it folded."""
    folded = 0
    for node in list(graph.nodes):
        inverse = _INVERSE.get(str(node.target)) if node.op == "call_function" else None
        source = node.args[0] if inverse and node.args else None
        if not hasattr(source, "op") or str(source.target) != inverse:
            continue
        node.replace_all_uses_with(source.args[0])
        graph.erase_node(node)
        if not source.users:
            graph.erase_node(source)
        folded += 1
    return folded
