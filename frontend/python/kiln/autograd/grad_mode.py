"""Grad-mode context managers: no_grad, enable_grad, set_grad_enabled, inference_mode.

They set thread-local state in the runtime (read by the dispatcher's Autograd key) and work
as context managers and as function decorators, like torch's.
"""
import functools

from .. import _C


class _DecoratorContextManager:
    """A context manager that can also decorate a function (run the whole call inside it)."""

    def __call__(self, fn):
        @functools.wraps(fn)
        def wrapper(*args, **kwargs):
            with self.clone():
                return fn(*args, **kwargs)

        return wrapper

    def clone(self):
        return self.__class__()


class no_grad(_DecoratorContextManager):
    """Disables gradient recording inside the block."""

    def __enter__(self):
        self.prev = _C.is_grad_enabled()
        _C._set_grad_enabled(False)

    def __exit__(self, *exc):
        _C._set_grad_enabled(self.prev)
        return False


class enable_grad(_DecoratorContextManager):
    """Enables gradient recording inside the block (e.g. within no_grad)."""

    def __enter__(self):
        self.prev = _C.is_grad_enabled()
        _C._set_grad_enabled(True)

    def __exit__(self, *exc):
        _C._set_grad_enabled(self.prev)
        return False


class set_grad_enabled(_DecoratorContextManager):
    """Sets grad mode to `mode`: takes effect at once, and as a context manager restores it."""

    def __init__(self, mode):
        self.prev = _C.is_grad_enabled()
        self.mode = bool(mode)
        _C._set_grad_enabled(self.mode)

    def __enter__(self):
        pass

    def __exit__(self, *exc):
        _C._set_grad_enabled(self.prev)
        return False

    def clone(self):
        return self.__class__(self.mode)


class inference_mode(_DecoratorContextManager):
    """Like no_grad, and marks the block as inference-only."""

    def __init__(self, mode=True):
        self.mode = bool(mode)

    def __enter__(self):
        self.prev = (_C.is_grad_enabled(), _C.is_inference_mode_enabled())
        if self.mode:
            _C._set_grad_enabled(False)
        _C._set_inference_mode(self.mode)

    def __exit__(self, *exc):
        _C._set_grad_enabled(self.prev[0])
        _C._set_inference_mode(self.prev[1])
        return False

    def clone(self):
        return self.__class__(self.mode)


def is_grad_enabled():
    return _C.is_grad_enabled()


def is_inference_mode_enabled():
    return _C.is_inference_mode_enabled()
