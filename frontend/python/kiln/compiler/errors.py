"""What kiln.compile reports to users: why a frame was not captured, and its exceptions."""
from dataclasses import dataclass


@dataclass(frozen=True)
class BreakReason:
    """Why a frame runs eagerly instead of compiled (a whole-frame graph break): the tracer's
    reason, and where in the user's source it stopped."""

    reason: str
    filename: str
    lineno: int
    line: str

    def __str__(self):
        text = f"{self.reason}\n  at {self.filename}:{self.lineno}"
        if self.line:
            text += f"\n    {self.line.strip()}"
        return text


class Unsupported(RuntimeError):
    """A frame compiled with fullgraph=True holds something the tracer cannot capture;
    `break_reason` says what and where, and so does the message."""

    def __init__(self, break_reason):
        self.break_reason = break_reason
        super().__init__(str(break_reason))

    def __reduce__(self):
        return type(self), (self.break_reason,)


class BackendCompilerFailed(RuntimeError):
    """A backend raised while compiling a graph and kiln.config.strict is True (the backend's
    exception is the __cause__)."""


class InvalidBackend(RuntimeError):
    """kiln.compile was given a backend name that is not registered."""
