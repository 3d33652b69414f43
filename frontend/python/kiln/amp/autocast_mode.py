"""autocast (torch.amp.autocast). kiln does not run ops in reduced precision automatically yet:
an autocast that would take effect raises NotImplementedError when entered, naming what to do
instead, rather than silently computing in float32. What torch itself turns off is off here too:
`autocast("cuda")` where CUDA is not available warns and does nothing (torch's exact behaviour on
a machine without a GPU, the common case of a GPU training script run on a CPU), as does
enabled=False."""
import functools
import warnings

from .. import _C

__all__ = ["autocast", "is_autocast_available", "is_autocast_enabled"]

_DEFAULT_DTYPES = {"cuda": _C.float16, "cpu": _C.bfloat16}


def is_autocast_available(device_type):
    """Whether kiln can autocast on this device type: not yet, on any."""
    return False


def is_autocast_enabled(device_type=None):
    return False


class autocast:
    def __init__(self, device_type, dtype=None, enabled=True, cache_enabled=None):
        if not isinstance(device_type, str):
            raise ValueError(f"Expected `device_type` of type `str`, got: `{type(device_type)}`")
        self.device = device_type
        self.fast_dtype = dtype if dtype is not None else _DEFAULT_DTYPES.get(device_type, _C.float16)
        self._enabled = enabled
        if enabled and device_type == "cuda":
            from .. import cuda
            if not cuda.is_available():
                warnings.warn("CUDA is not available or torch_xla is imported. Disabling autocast.", stacklevel=2)
                self._enabled = False

    @property
    def _kiln_trace_noop_context(self):
        """Read by kiln's capture: a disabled autocast is a no-op `with` inside a compiled frame."""
        return not self._enabled

    def __enter__(self):
        if self._enabled:
            raise NotImplementedError(
                f"kiln.autocast(device_type={self.device!r}, dtype={self.fast_dtype}): automatic mixed precision "
                "is not implemented in kiln; run in float32 (enabled=False), or convert the model and its inputs "
                f"with .to({self.fast_dtype}) to compute in that dtype throughout")
        return self

    def __exit__(self, *exc):
        return False

    def __call__(self, func):
        @functools.wraps(func)
        def wrapper(*args, **kwargs):
            with self:
                return func(*args, **kwargs)
        return wrapper
