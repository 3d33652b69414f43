"""The frame hook extension kiln._C._capture, looked up when first needed so that kiln (and
kiln.compile) import in a build without it and fail only when compiling is attempted."""
from .. import _C


def capture_module():
    """kiln._C._capture, or a RuntimeError saying that this kiln cannot compile."""
    module = getattr(_C, "_capture", None)
    if module is None:
        raise RuntimeError(
            "kiln.compile needs the frame capture extension kiln._C._capture, which this build of kiln "
            "lacks; call the function without kiln.compile, or rebuild kiln with frontend/capture")
    return module



def trace_frame(frame_info, options):
    """kiln._C._capture.trace_frame (the bytecode tracer), or a RuntimeError saying it is absent."""
    capture = capture_module()
    trace = getattr(capture, "trace_frame", None)
    if trace is None:
        raise RuntimeError("kiln.compile needs the bytecode tracer kiln._C._capture.trace_frame, which this "
                           "build of kiln lacks")
    return trace(frame_info, options)
