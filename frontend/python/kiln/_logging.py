"""kiln's logs: what kiln.compile did, printed to stderr when asked for.

Turn them on with the KILN_LOGS environment variable (read at import), a comma list of names
with `+name` for more detail (`KILN_LOGS=graph,+recompiles`), or with
`kiln.set_logs(graph=True, recompiles=logging.DEBUG)`. Each name is the logger `kiln.<name>`
of the `logging` module: enabled means level INFO, `+` means DEBUG. The `kiln` logger has its
own stderr handler and does not propagate, so the lines show without any logging setup and
are not printed twice when the application configured the root logger.
"""
import logging
import os
import sys
import warnings

LOG_NAMES = {
    "graph": "each captured graph in kiln's text form (+graph: also its generated Python code)",
    "guards": "the guards of each new cache entry",
    "recompiles": "why a frame is compiled again: the guard each cached entry failed",
    "graph_breaks": "why a frame runs eagerly instead of compiled (+graph_breaks: also the source line)",
    "aot": "graphs that need autograd and so run op by op rather than through a compiling backend",
    "output_code": "the C++ source the inductor backend generates for each graph (+output_code: "
                   "also its loop program)",
    "dynamic": "dynamic shapes: which input dims a graph has as size symbols, and why a frame "
               "compiled for static sizes instead",
    "loops": "the inductor backend's fusion decisions for each graph: which buffers became one "
             "kernel and why others did not (+loops: also the scheduled loop program)",
}

_OFF = logging.WARNING


class _StderrHandler(logging.StreamHandler):
    """A handler writing to the sys.stderr of the moment, so that redirections made after import
    (contextlib.redirect_stderr, pytest's capsys) see the logs."""

    def __init__(self):
        super().__init__(sys.stderr)

    @property
    def stream(self):
        return sys.stderr

    @stream.setter
    def stream(self, value):
        pass


def _install_handler():
    root = logging.getLogger("kiln")
    handler = _StderrHandler()
    handler.setFormatter(logging.Formatter("[%(name)s] %(message)s"))
    root.addHandler(handler)
    root.propagate = False


def get_logger(name):
    """The logger of one log name (a key of LOG_NAMES)."""
    if name not in LOG_NAMES:
        raise ValueError(f"unknown kiln log {name!r}; the logs are: {', '.join(LOG_NAMES)}")
    return logging.getLogger(f"kiln.{name}")


def _level(value):
    if value is True:
        return logging.INFO
    if value is False or value is None:
        return _OFF
    if isinstance(value, int):
        return value
    raise TypeError(f"a kiln log setting is True, False or a logging level, got {value!r}")


def set_logs(**logs):
    """Sets which logs print: `name=True` (INFO), `name=logging.DEBUG` (more detail, like
    `+name` in KILN_LOGS) or False. Names left out are turned off, so `set_logs()` silences all."""
    unknown = [name for name in logs if name not in LOG_NAMES]
    if unknown:
        raise ValueError(f"unknown kiln log(s) {', '.join(map(repr, unknown))}; "
                         f"the logs are: {', '.join(LOG_NAMES)}")
    levels = {name: _level(logs.get(name, False)) for name in LOG_NAMES}
    for name, level in levels.items():
        get_logger(name).setLevel(level)


def parse_logs_spec(spec):
    """The set_logs arguments a KILN_LOGS value asks for, and the names it has that are unknown."""
    logs, unknown = {}, []
    for item in spec.split(","):
        item = item.strip()
        if not item:
            continue
        detail = item.startswith("+")
        name = item.lstrip("+")
        if name in LOG_NAMES:
            logs[name] = logging.DEBUG if detail else True
        else:
            unknown.append(item)
    return logs, unknown


def _configure_from_env():
    logs, unknown = parse_logs_spec(os.environ.get("KILN_LOGS", ""))
    if unknown:
        warnings.warn(f"KILN_LOGS: unknown log(s) {', '.join(unknown)} ignored; "
                      f"the logs are: {', '.join(LOG_NAMES)}", stacklevel=2)
    set_logs(**logs)


_install_handler()
_configure_from_env()
