"""kiln.fx: graphs of Python programs, as torch.fx — over kiln's C++ graph IR.

- Graph / Node: build, inspect and edit graphs (kiln.fx.graph); str(graph) is the text form of
  docs/ir-text.md and parse(text) reads it back;
- GraphModule: a Module running a graph through generated Python code (`.code`);
- Interpreter: runs a graph node by node;
- symbolic_trace / Tracer / Proxy: capture a Module's forward by running it on Proxies;
- passes: the C++ passes by name (`passes.run(graph, "dce,cse")`) and ShapeProp;
- retrace: the graph traced again on fake tensors, decomposed to core ATen or prims;
- targets: call_function targets are qualified names; resolve_target / qualified_name /
  register_target convert between names and callables; `aten.<op>.<overload>` calls one
  overload of the op table, `prims.<op>` one op of the Prims IR.

See docs/fx.md.
"""
from . import passes, targets  # noqa: F401
from .codegen import PythonCode  # noqa: F401
from .decompose import retrace  # noqa: F401
from .graph import (  # noqa: F401
    Graph,
    Node,
    NodeMeta,
    SourceLoc,
    TensorMetadata,
    Type,
    map_aggregate,
    map_arg,
    parse,
    parse_all,
    tensor_type,
    type_of,
)
from .graph_module import GraphModule  # noqa: F401
from .interpreter import Interpreter  # noqa: F401
from .proxy import Attribute, Proxy, TraceError  # noqa: F401
from .targets import aten, prims, qualified_name  # noqa: F401
from .targets import register as register_target  # noqa: F401
from .targets import resolve as resolve_target  # noqa: F401
from .tracer import Tracer, symbolic_trace, wrap  # noqa: F401
