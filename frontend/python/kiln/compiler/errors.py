"""What kiln.compile reports to users: why a frame was not captured, and its exceptions."""
from dataclasses import dataclass


@dataclass(frozen=True)
class BreakReason:
    """Why a graph breaks, or a frame runs eagerly: the tracer's reason, where in the user's
    source it stopped (the innermost frame), and user_stack: (filename, lineno, function, line)
    per frame from the compiled frame down through the calls inlined into it to that line."""

    reason: str
    filename: str
    lineno: int
    line: str
    user_stack: tuple = ()

    @classmethod
    def of_failure(cls, failure):
        """The reason of a failed trace (the tracer's result dict)."""
        stack = tuple(tuple(frame) for frame in failure.get("user_stack", ()))
        return cls(failure["reason"], failure["filename"], failure["lineno"], failure["line"], stack)

    def stack_text(self, indent=2):
        """The user stack, a frame a line (`file:line, in function`, its source below), outermost first."""
        pad = " " * indent
        frames = self.user_stack or ((self.filename, self.lineno, "", self.line),)
        text = ""
        for filename, lineno, function, line in frames:
            text += f"{pad}{filename}:{lineno}" + (f", in {function}" if function else "") + "\n"
            if line:
                text += f"{pad}  {line.strip()}\n"
        return text

    def __str__(self):
        text = f"{self.reason}\n  at {self.filename}:{self.lineno}"
        if self.line:
            text += f"\n    {self.line.strip()}"
        if len(self.user_stack) > 1:
            text += "\n  user stack (the call inlined into the compiled frame first):\n" + self.stack_text(4).rstrip("\n")
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
