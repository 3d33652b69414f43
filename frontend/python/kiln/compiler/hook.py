"""The frame hook extension kiln._C._capture, looked up when first needed so that kiln (and
kiln.compile) import in a build without it and fail only when compiling is attempted."""
import sys
import warnings

from .. import _C, config
from ..autograd.function import applications_of_trace

_warned_unsupported_python = False


def capture_module():
    """kiln._C._capture, or a RuntimeError saying that this kiln cannot compile."""
    module = getattr(_C, "_capture", None)
    if module is None:
        raise RuntimeError(
            "kiln.compile needs the frame capture extension kiln._C._capture, which this build of kiln "
            "lacks; call the function without kiln.compile, or rebuild kiln with frontend/capture")
    return module


def capture_supported():
    """Whether the frame hook knows this CPython's interpreter frames and bytecode (3.11 to 3.13;
    frontend/capture/PythonVersion.h). On a newer Python kiln builds and runs eagerly, but the
    hook is never installed."""
    return bool(getattr(capture_module(), "supported", False))


def check_capture_supported(fullgraph=False):
    """At kiln.compile: True where kiln captures; on a Python it cannot, raise (kiln.config.strict
    or fullgraph) or warn once that compiled functions run eagerly there, and return False."""
    global _warned_unsupported_python
    if capture_supported():
        return True
    version = "%d.%d" % sys.version_info[:2]
    message = (f"kiln.compile does not support Python {version} yet (frame capture knows CPython 3.11 "
               "to 3.13): compiled functions run eagerly")
    if config.strict or fullgraph:
        from .errors import BreakReason, Unsupported

        raise Unsupported(BreakReason(message, "<kiln.compile>", 0, ""))
    if not _warned_unsupported_python:
        _warned_unsupported_python = True
        warnings.warn(message, RuntimeWarning, stacklevel=3)
    return False


def trace_frame(frame_info, options):
    """kiln._C._capture.trace_frame (the bytecode tracer), or a RuntimeError saying it is absent."""
    capture = capture_module()
    trace = getattr(capture, "trace_frame", None)
    if trace is None:
        raise RuntimeError("kiln.compile needs the bytecode tracer kiln._C._capture.trace_frame, which this "
                           "build of kiln lacks")
    with applications_of_trace() as keep:
        result = trace(frame_info, options)
        keep(result["graph"] if result.get("ok") else None)
    return result
