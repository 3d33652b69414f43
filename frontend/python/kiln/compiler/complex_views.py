"""Complex round trips folded out of a prims graph before the inductor backend plans it.

Complex ops reach the compiler already rewritten into real ops on view_as_real views
(runtime/complex, docs/complex.md), so their graphs chain view_as_complex and view_as_real:
the forward's `view_as_real(view_as_complex(x) * w)` becomes `view_as_complex(stack(...))`
followed by `view_as_real`, and a backward turns each view round the other way. Nodes that touch
complex values run eagerly between compiled segments (fallback.py), and every such node cuts the
graph. A round trip is a view of x with x's own geometry, so it is x itself: folding it leaves
only the complex values the graph really has (complex inputs and outputs, and their views) as
eager steps, and the real arithmetic between them compiles as one segment.

A view taken of the complex values in between (`view_as_real(view_as_complex(x)[:, :-1])`: a
slice's backward writing a gradient into zeros, stft's frames) is the same view of x's (re, im)
pairs with one more dimension of 2, so it is rewritten as a view of x: the writes through it then
land on a real storage the fallback planner sees (a complex view between them hid the write
from it and the storage's readers read zeros)."""
from ..fx.graph import tensor_type

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


def _real_dtype(dtype):
    from .. import _C
    return _C.float64 if dtype == _C.complex128 else _C.float32


def _paired(node, x, graph):
    """The real view of `x` (the (re, im) pairs of view_as_complex(x)) that complex view `node`
    is, built in `graph` before `node`'s view_as_real user; None when node's op has no such form."""
    t = node.type
    target, args = str(node.target), node.args
    n = len(t.shape)
    if target == "prims.slice":
        strides = list(args[3]) if len(args) > 3 and args[3] is not None else [1] * n
        new_args = (x, list(args[1]) + [0], list(args[2]) + [2], strides + [1])
    elif target == "prims.transpose":
        new_args = (x, list(args[1]) + [len(args[1])])
    elif target == "prims.broadcast_in_dim":
        new_args = (x, list(args[1]) + [2], list(args[2]) + [len(args[1])])
    elif target == "prims.squeeze":
        new_args = (x, list(args[1]))
    elif target == "prims.reshape":
        new_args = (x, list(args[1]) + [2])
    elif target == "prims.view_of":
        new_args = (x,)
    else:
        return None
    strides = t.stride if t.has_explicit_stride else None
    real = tensor_type(_real_dtype(t.dtype), list(t.shape) + [2],
                       None if strides is None else [2 * s for s in strides] + [1], t.device)
    return graph.call_function(target, new_args, type_expr=real)


def real_views_of_complex_views(graph):
    """Rewrites view_as_real(V(view_as_complex(x))), V a chain of view prims, as the same views
    of x with a trailing (re, im) dimension (see the module's docstring); returns how many."""
    rewritten = 0
    for node in list(graph.nodes):
        if node.op != "call_function" or str(node.target) != "aten.view_as_real" or not node.args:
            continue
        chain, src = [], node.args[0]
        while hasattr(src, "op") and src.op == "call_function" and str(src.target) in _COMPLEX_VIEWS:
            chain.append(src)
            src = src.args[0]
        if not chain or not hasattr(src, "op") or str(src.target) != "aten.view_as_complex":
            continue
        if any(getattr(v.type, "shape", None) is None for v in chain):
            continue
        with graph.inserting_before(node):
            x = src.args[0]
            for view in reversed(chain):
                x = _paired(view, x, graph)
                if x is None:
                    break
        if x is None:
            continue
        node.replace_all_uses_with(x)
        graph.erase_node(node)
        rewritten += 1
    return rewritten


_COMPLEX_VIEWS = frozenset({"prims.slice", "prims.transpose", "prims.broadcast_in_dim", "prims.squeeze",
                            "prims.reshape", "prims.view_of"})
