"""kiln.compiler.is_compiling(): whether the calling code is being traced by kiln.compile
(torch.compiler.is_compiling's role). Here it answers False; the tracer answers True for a call
it traces (frontend/capture/Calls.cpp), so code can pick a traceable path (kiln.optim's Adam)."""


def is_compiling():
    """True while kiln.compile traces the calling code, False when it runs eagerly."""
    return False
