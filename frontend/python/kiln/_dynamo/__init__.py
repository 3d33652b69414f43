"""kiln._dynamo: the torch._dynamo names training scripts use around torch.compile, each the
kiln.compiler function that does the same (reset, disable, explain, mark_dynamic, is_compiling,
optimize, graph_break), and `config` (kiln._dynamo.config: torch's setting names mapped onto kiln.config)."""
from .. import _compiling
from ..compiler import disable, explain, is_compiling, mark_dynamic, reset  # noqa: F401
from ..compiler.errors import Unsupported  # noqa: F401
from . import config  # noqa: F401

__all__ = ["config", "disable", "explain", "graph_break", "is_compiling", "mark_dynamic", "optimize", "reset",
           "Unsupported"]


def graph_break(msg=""):
    """torch._dynamo.graph_break(): in compiled code, a graph break at the call (the graph so far
    compiles, the rest of the frame resumes in a graph of its own); eagerly, nothing."""


_compiling.not_traced(graph_break, "kiln._dynamo.graph_break() (an explicit graph break)")


def optimize(backend="inductor", *, nopython=False, dynamic=None, disable=False):
    """torch._dynamo.optimize(backend)(fn): kiln.compile(fn, backend=..., fullgraph=nopython)."""
    from ..compiler import compile as _compile

    def decorate(fn):
        if disable:
            return fn
        return _compile(fn, backend=backend, fullgraph=nopython, dynamic=dynamic)
    return decorate
