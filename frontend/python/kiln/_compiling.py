"""kiln.compiler.is_compiling(): whether the calling code is being traced by kiln.compile
(torch.compiler.is_compiling's role). Here it answers False; the tracer answers True for a call
it traces (frontend/capture/Calls.cpp), so code can pick a traceable path (kiln.optim's Adam)."""


def is_compiling():
    """True while kiln.compile traces the calling code, False when it runs eagerly."""
    return False


class _RestoreGradMode:
    """The `__exit__` of a grad-mode `with` block (no_grad, enable_grad, set_grad_enabled) that a
    graph break cut: a resume function gets it on its stack where the block's exit was, and
    calling it (at the block's end, or from its exception handler with the exception's three
    values) switches grad mode back. The tracer reads the two instances below as the block's
    exit (frontend/capture), so the code after a break inside the block compiles too."""

    __slots__ = ("mode",)

    def __init__(self, mode):
        self.mode = mode

    def __call__(self, *exc_info):
        from . import _C

        _C._set_grad_enabled(self.mode)
        return False

    def __repr__(self):
        return f"<end of a grad-mode block: grad mode back to {self.mode}>"


RESTORE_GRAD_ENABLED = _RestoreGradMode(True)
RESTORE_GRAD_DISABLED = _RestoreGradMode(False)
