"""kiln.compiler: capturing Python functions into graphs (TorchDynamo's role).

- compile(fn, backend=..., fullgraph=...): a function or kiln.nn.Module whose calls run
  captured, compiled graphs (OptimizedModule for modules);
- explain(fn)(*args): what capture makes of one call (ExplainOutput);
- disable(fn), reset(), is_compiling(); mark_dynamic(t, dim) (dynamic shapes, dynamic.py);
- backends: register_backend, list_backends, lookup_backend;
- errors: Unsupported (fullgraph), BackendCompilerFailed (kiln.config.strict), InvalidBackend.

Settings are in kiln.config, logs in KILN_LOGS / kiln.set_logs. The frame hook itself is
kiln._C._capture (C++); frame_callback.py is its Python side. See docs/compile.md.
"""
from .._compiling import is_compiling  # noqa: F401
from .backends import list_backends, lookup_backend, register_backend  # noqa: F401
from .compile_api import compile, disable, explain, reset  # noqa: F401
from .dynamic import mark_dynamic  # noqa: F401
from .errors import BackendCompilerFailed, BreakReason, InvalidBackend, Unsupported  # noqa: F401
from .explain import ExplainOutput  # noqa: F401
from .optimized_module import OptimizedModule  # noqa: F401
