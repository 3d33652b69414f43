"""kiln.jit: the parts of torch.jit that model code written for PyTorch uses in eager mode.

TorchScript's annotations are no-ops outside scripting, and so are they here: `@jit.unused`,
`@jit.ignore`, `@jit.export`, `jit.annotate(T, v)`, `jit.Final`, `jit.is_scripting()` and
`jit.is_tracing()` (both False: kiln never runs code as TorchScript). kiln has no TorchScript
compiler: `jit.script` and `jit.trace` raise, pointing at kiln.compile (a model that only needs
to run faster); they never hand back the function unchanged,
which would pretend a serialized program exists."""
from typing import Final  # noqa: F401 (torch.jit.Final is typing.Final)

__all__ = ["Final", "_overload", "_overload_method", "annotate", "export", "ignore", "interface", "is_scripting", "is_tracing", "script", "trace",
           "unused", "script_if_tracing", "wait", "fork"]


def is_scripting():
    """False: kiln runs Python, never TorchScript (torch.jit.is_scripting() outside scripting)."""
    return False


def is_tracing():
    """False: kiln has no torch.jit.trace."""
    return False


def annotate(the_type, the_value):
    """The value: a type hint for the TorchScript compiler only."""
    return the_value


def _identity_decorator(fn=None, **kwargs):
    if fn is None:  # @jit.ignore(drop=True)
        return lambda f: f
    return fn


unused = _identity_decorator
ignore = _identity_decorator
export = _identity_decorator
interface = _identity_decorator


def _overload(fn):
    """TorchScript's overload declarations (`@torch.jit._overload_method` on stub defs that a
    later def of the same name replaces): nothing to do outside TorchScript."""
    return fn


_overload_method = _overload


def script_if_tracing(fn):
    """The function itself: it is scripted only under torch.jit.trace, which kiln does not have."""
    return fn


def _no_torchscript(what):
    raise NotImplementedError(
        f"kiln.jit.{what}(): kiln has no TorchScript compiler. To make a model faster use kiln.compile(model); "
        "to inspect its graph use kiln.fx.symbolic_trace or kiln.compile with KILN_LOGS=graph_code")


def script(obj=None, *args, **kwargs):
    _no_torchscript("script")


def trace(func=None, *args, **kwargs):
    _no_torchscript("trace")


class Future:
    """What jit.fork returns: the call's result, computed at once (no TorchScript parallelism)."""

    def __init__(self, value):
        self._value = value

    def wait(self):
        return self._value


def fork(fn, *args, **kwargs):
    """Runs fn(*args, **kwargs) now, as torch.jit.fork does outside TorchScript."""
    return Future(fn(*args, **kwargs))


def wait(future):
    return future.wait()
