"""The inductor backend's graph-level cache: what compiling a captured graph produced (the
scheduled loop program, the shared object holding its code, the outputs computed eagerly as
views of inputs), stored with kiln._C._codegen.put_artifact under a key naming everything the
result depends on, so a fresh process skips retracing, lowering, scheduling and emitting C++.

An entry that cannot be used (damaged, which get_artifact reports as absent; a shared object
since removed from the kernel cache; an unreadable program) is a miss: the graph is compiled
again and the entry rewritten.
"""
import json
import logging
import os

from .. import _C, _logging
from .._C import _codegen
from ..fx import GraphModule
from ..fx.graph import parse
from . import debug_dir

_log = _logging.get_logger("output_code")
_FORMAT = "kiln-graph-cache-v4"
_build_identity = None


def build_identity():
    """The sizes and modification times of kiln's extension module and of the Python packages
    a captured graph passes through on its way to C++ (kiln.fx, kiln.compiler): a rebuilt kiln
    (lowering or code generation changed without a version bump) misses the cache."""
    global _build_identity
    if _build_identity is None:
        package = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
        paths = [_C.__file__]
        for sub in ("fx", "compiler"):
            folder = os.path.join(package, sub)
            paths += [os.path.join(folder, f) for f in os.listdir(folder) if f.endswith(".py")]
        parts = []
        for path in sorted(paths):
            st = os.stat(path)
            parts.append(f"{os.path.relpath(path, package)} {st.st_size} {st.st_mtime_ns}")
        _build_identity = "\n".join(parts)
    return _build_identity


class Entry:
    """program: the scheduled loop program's text (None when every output is a view); path: its
    shared object (stored by file name, found in the kernel cache's folder); views: the prims
    graph (text) computing the outputs that are views of inputs, or None; draws: the graph (text)
    of the values computed eagerly at each call (random draws), or None; where: per output,
    (from the view graph?, index); attr_targets: the attributes passed after the placeholders.
    kernel, view_fn and draw_fn are built from these."""

    def __init__(self, program, path, views, where, attr_targets, kernel=None, draws=None,
                 schedule_log=None):
        self.program, self.path, self.views, self.draws = program, path, views, draws
        self.schedule_log = schedule_log
        self.where = [(bool(is_view), int(i)) for is_view, i in where]
        self.attr_targets = list(attr_targets)
        self.kernel = kernel
        self.view_fn = self.draw_fn = None

    def to_bytes(self):
        # The library by file name: the cache folder may have been moved or copied since.
        library = os.path.basename(self.path) if self.path is not None else None
        return json.dumps({"format": _FORMAT, "program": self.program, "library": library,
                           "views": self.views, "draws": self.draws, "where": self.where,
                           "attr_targets": self.attr_targets, "schedule_log": self.schedule_log}).encode()

    @classmethod
    def from_bytes(cls, data):
        d = json.loads(data)
        if d.get("format") != _FORMAT:
            raise ValueError(f"not a {_FORMAT} entry")
        library = d["library"]
        if library is not None and (not isinstance(library, str) or os.path.basename(library) != library):
            raise ValueError(f"the library {library!r} is not a file name")
        path = os.path.join(_codegen.cache_dir(), "kernels", library) if library is not None else None
        entry = cls(d["program"], path, d["views"], d["where"], d["attr_targets"], draws=d["draws"],
                    schedule_log=d.get("schedule_log"))
        if entry.program is not None:
            entry.kernel = _codegen.CompiledKernel(entry.path, "kiln_entry", entry.program)
        if entry.views is not None:
            from .fallback import InputRelativeViews
            entry.view_fn = InputRelativeViews(parse(entry.views))
        if entry.draws is not None:
            entry.draw_fn = GraphModule({}, parse(entry.draws)).forward
        return entry


def load(key):
    """The Entry stored under `key`, ready to run, or None."""
    data = _codegen.get_artifact(key)
    if data is None:
        return None
    try:
        entry = Entry.from_bytes(data)
    except Exception as error:  # noqa: BLE001 - any unusable entry is a miss
        _log.info("graph cache: unusable entry (%s: %s); compiling again", type(error).__name__, error)
        return None
    if entry.program is not None:
        # The debug folder gets the stages a compile writes, from the cache (a graph cache hit
        # neither schedules nor emits).
        debug_dir.write("loops.kir", entry.program)
        if entry.schedule_log is not None:
            debug_dir.write("schedule.log", entry.schedule_log)
        source = os.path.splitext(entry.path)[0] + ".cpp"
        if debug_dir.enabled() or _log.isEnabledFor(logging.INFO):
            text = open(source).read() if os.path.exists(source) else "(source not in the cache)\n"
            debug_dir.write("output_code.cpp", text)
            _log.info("output code (%s, graph cache hit):\n%s", entry.path, text)
    return entry


def store(key, entry):
    """Stores `entry` under `key`; a cache that cannot be written only costs the next process
    a compile."""
    try:
        _codegen.put_artifact(key, entry.to_bytes())
    except (OSError, RuntimeError) as error:
        _log.info("graph cache: cannot store the entry: %s", error)


_SCHEDULE_FORMAT = "kiln-schedule-cache-v1"


def load_schedule(key):
    """(scheduled loop program text, the scheduler's log) stored under `key` by store_schedule,
    or None. The segments of a graph cut by fallback ops are not graph cache entries (those hold
    one program); their schedules are, so a fresh process neither lowers nor schedules them (a
    ResNet's training step: 1.5 s), and emits their C++ to find it in the kernel cache."""
    data = _codegen.get_artifact(key)
    if data is None:
        return None
    try:
        d = json.loads(data)
        if d.get("format") != _SCHEDULE_FORMAT or not isinstance(d.get("program"), str) or \
                not isinstance(d.get("schedule_log"), str):
            raise ValueError(f"not a {_SCHEDULE_FORMAT} entry")
    except ValueError as error:  # json's errors are ValueErrors too
        _log.info("graph cache: unusable schedule (%s); scheduling again", error)
        return None
    return d["program"], d["schedule_log"]


def store_schedule(key, program, schedule_log):
    """Stores a scheduled program under `key` (see load_schedule); as store, a cache that cannot
    be written only costs the next process a lowering."""
    data = json.dumps({"format": _SCHEDULE_FORMAT, "program": program, "schedule_log": schedule_log})
    try:
        _codegen.put_artifact(key, data.encode())
    except (OSError, RuntimeError) as error:
        _log.info("graph cache: cannot store the schedule: %s", error)
