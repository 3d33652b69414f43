"""KILN_DEBUG_DIR: every compiled graph's stages written as files (kiln.config.debug_dir, set
from $KILN_DEBUG_DIR at import or by `kiln run script.py --dump DIR`).

Layout, one folder per compiled function (a kiln.compile call, named after the function it
compiled: its qualified name without `<locals>`, `f_2` for a second one of the same name) and
one per graph inside it:

    DIR/<function>/<graph>/info.txt        frame, file:line, cache entry, op count, backend
                           captured.txt    the captured graph (kiln.fx text form)
                           captured.py     its generated Python code
                           core_aten.txt   kiln.fx.retrace(graph, "core_aten")
                           prims.txt       kiln.fx.retrace(graph, "prims")
                           guards.txt      the guards of its cache entry
    DIR/<function>/graph_breaks.txt        why frames of that function ran eagerly

<graph> is the name the `graph` and `guards` logs use (`__compiled_fn_0`). Files of an earlier
run with the same names are replaced.

Later stages are written by the backend that computes them: while a backend compiles a graph,
`write(filename, text)` adds a file to that graph's folder (the loop program, the generated
C++), and does nothing when no debug folder is set.
"""
import contextlib
import contextvars
import os
import re
import weakref

from .. import config

_function_dirs = weakref.WeakKeyDictionary()  # FrameCallback -> its folder name
_used_names = set()
# The GraphDump of the graph a backend is compiling now (per thread and async context).
_current = contextvars.ContextVar("kiln_debug_graph", default=None)
_prefix = contextvars.ContextVar("kiln_debug_prefix", default="")


def enabled():
    return bool(config.debug_dir)


def _safe_name(name):
    return re.sub(r"[^A-Za-z0-9_.-]", "_", name) or "function"


def _function_dir(callback, code):
    name = _function_dirs.get(callback)
    if name is None:
        base = _safe_name(code.co_qualname.replace(".<locals>", ""))
        name, n = base, 1
        while name in _used_names:
            n += 1
            name = f"{base}_{n}"
        _used_names.add(name)
        _function_dirs[callback] = name
    return os.path.join(config.debug_dir, name)


class GraphDump:
    """The folder of one compiled graph."""

    def __init__(self, path):
        self.path = path
        os.makedirs(path, exist_ok=True)

    def write(self, filename, text):
        with open(os.path.join(self.path, filename), "w", encoding="utf-8") as f:
            f.write(str(text))
            if not str(text).endswith("\n"):
                f.write("\n")


def _retraced(graph, level):
    from ..fx import retrace

    try:
        return str(retrace(graph, level))
    except Exception as error:  # noqa: BLE001 - a debugging aid must not break compiling
        return f"# kiln.fx.retrace(graph, {level!r}) failed: {type(error).__name__}: {error}\n"


def dump_graph(callback, code, graph_name, *, gm, graph, guards, op_count, entry, backend):
    """Writes the stages of a captured graph that exist before the backend runs; returns its
    GraphDump (None when no debug folder is set)."""
    if not enabled():
        return None
    dump = GraphDump(os.path.join(_function_dir(callback, code), graph_name))
    dump.write("info.txt", f"graph: {graph_name}\nframe: {code.co_qualname}\n"
                           f"location: {code.co_filename}:{code.co_firstlineno}\n"
                           f"cache entry: {entry}\nop count: {op_count}\nbackend: {backend}\n")
    dump.write("captured.txt", graph)
    dump.write("captured.py", gm.code)
    dump.write("core_aten.txt", _retraced(graph, "core_aten"))
    dump.write("prims.txt", _retraced(graph, "prims"))
    dump.write("guards.txt", guards)
    return dump


def dump_break(callback, code, reason):
    """Appends a graph break (a frame that runs eagerly) to its function's graph_breaks.txt."""
    if not enabled():
        return
    path = _function_dir(callback, code)
    os.makedirs(path, exist_ok=True)
    with open(os.path.join(path, "graph_breaks.txt"), "a", encoding="utf-8") as f:
        f.write(f"{code.co_qualname}: {reason.reason}\n  at {reason.filename}:{reason.lineno}\n")
        if reason.line:
            f.write(f"    {reason.line.strip()}\n")


class compiling:
    """`with compiling(dump):` makes `dump` the folder write() adds to (the frame callback
    wraps each backend call in it)."""

    def __init__(self, dump):
        self.dump = dump

    def __enter__(self):
        self.token = _current.set(self.dump)
        return self.dump

    def __exit__(self, *exc):
        _current.reset(self.token)


def write(filename, text):
    """Adds `filename` with `text` to the folder of the graph being compiled now: the hook for
    backends' own stages (the loop program, the generated C++). Nothing happens when no debug
    folder is set or no graph is being compiled."""
    dump = _current.get()
    if dump is not None:
        dump.write(_prefix.get() + filename, text)


@contextlib.contextmanager
def stage(prefix):
    """Files written inside are named `prefix` + their name (AOT autograd's forward and
    backward programs: forward_loops.kir, backward_output_code.cpp)."""
    token = _prefix.set(prefix)
    try:
        yield
    finally:
        _prefix.reset(token)
