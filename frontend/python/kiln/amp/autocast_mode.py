"""autocast (torch.amp.autocast): automatic mixed precision.

Inside `with kiln.autocast("cpu")` (bfloat16 by default; float16 on request) the ops PyTorch
lists run in that dtype: matmuls, linear layers, convolutions, attention; losses, linear algebra
and FFTs run in float32; cat/stack take their widest input dtype; every other op runs on its
inputs as they are (runtime/Autocast.cpp has the lists, PyTorch's). The casts are ordinary ops:
autograd records them, so gradients come back in the parameters' dtype, and kiln.compile traces
them into its graph (a compiled function called inside autocast, or holding a `with autocast()`
block, compiles once per autocast state). `autocast("cuda")` where CUDA is not available warns
and does nothing, as torch does on a machine without a GPU."""
import functools
import warnings

from .. import _C
from .._autocast_state import _cast

__all__ = ["autocast", "custom_bwd", "custom_fwd", "is_autocast_available", "is_autocast_enabled"]

_DEVICES = ("cpu", "cuda")


def is_autocast_available(device_type):
    """Whether kiln can autocast on this device type."""
    return device_type in _DEVICES


def is_autocast_enabled(device_type=None):
    """torch.is_autocast_enabled: for `device_type` ("cuda" when not given, as torch)."""
    return _C._is_autocast_enabled("cuda" if device_type is None else device_type)


def _check_device(device_type):
    if not isinstance(device_type, str):
        raise ValueError(f"Expected `device_type` of type `str`, got: `{type(device_type)}`")


class autocast:
    def __init__(self, device_type, dtype=None, enabled=True, cache_enabled=None):
        _check_device(device_type)
        if not is_autocast_available(device_type):
            raise RuntimeError(f"User specified an unsupported autocast device_type '{device_type}'")
        self.device = device_type
        self.fast_dtype = _C._get_autocast_dtype(device_type) if dtype is None else dtype
        self._cache_enabled = _C._is_autocast_cache_enabled() if cache_enabled is None else cache_enabled
        if enabled and device_type == "cuda":
            from .. import cuda
            if not cuda.is_available():
                warnings.warn("CUDA is not available or torch_xla is imported. Disabling autocast.", stacklevel=2)
                enabled = False
        if enabled and device_type == "cpu" and self.fast_dtype not in (_C.bfloat16, _C.float16):
            warnings.warn("In CPU autocast, but the target dtype is not supported. Disabling autocast.\n"
                          "CPU Autocast only supports dtype of torch.bfloat16, torch.float16 currently.",
                          stacklevel=2)
            enabled = False
        if enabled and device_type == "cuda" and self.fast_dtype not in (_C.bfloat16, _C.float16):
            warnings.warn("In CUDA autocast, but the target dtype is not supported. Disabling autocast.\n"
                          "CUDA Autocast only supports dtypes of torch.float16 and torch.bfloat16 currently.",
                          stacklevel=2)
            enabled = False
        self._enabled = enabled

    @property
    def _kiln_trace_noop_context(self):
        """Read by kiln's capture: a disabled autocast is a no-op `with` inside a compiled frame."""
        return not self._enabled

    @property
    def _kiln_trace_state(self):
        """Read by kiln's capture: what entering this autocast switches."""
        return (self.device, self._enabled, self.fast_dtype, self._cache_enabled)

    def __enter__(self):
        self._prev = (_C._is_autocast_enabled(self.device), _C._get_autocast_dtype(self.device),
                      _C._is_autocast_cache_enabled())
        _C._set_autocast_enabled(self.device, self._enabled)
        _C._set_autocast_dtype(self.device, self.fast_dtype)
        _C._autocast_increment_nesting()
        _C._set_autocast_cache_enabled(self._cache_enabled)
        return self

    def __exit__(self, *exc):
        # Leaving the outermost region drops the cached casts of the parameters (an optimizer
        # step after it changes them).
        if _C._autocast_decrement_nesting() == 0:
            _C._clear_autocast_cache()
        enabled, dtype, cache = self._prev
        _C._set_autocast_enabled(self.device, enabled)
        _C._set_autocast_dtype(self.device, dtype)
        _C._set_autocast_cache_enabled(cache)
        return False

    def __call__(self, func):
        @functools.wraps(func)
        def wrapper(*args, **kwargs):
            with self:
                return func(*args, **kwargs)
        return wrapper


def custom_fwd(fwd=None, *, device_type, cast_inputs=None):
    """torch.amp.custom_fwd: for an autograd.Function's forward. With cast_inputs, the forward
    runs with autocast off on its floating inputs cast to that dtype (when autocast is on);
    without, it runs under the caller's autocast, and custom_bwd runs the backward under the same."""
    _check_device(device_type)
    if fwd is None:
        return functools.partial(custom_fwd, device_type=device_type, cast_inputs=cast_inputs)

    @functools.wraps(fwd)
    def decorate_fwd(*args, **kwargs):
        ctx = args[0]
        ctx._dtype = _C._get_autocast_dtype(device_type)
        if cast_inputs is None:
            ctx._fwd_used_autocast = _C._is_autocast_enabled(device_type)
            return fwd(*args, **kwargs)
        ctx._fwd_used_autocast = False
        if not _C._is_autocast_enabled(device_type):
            return fwd(*args, **kwargs)
        with autocast(device_type=device_type, enabled=False):
            return fwd(*_cast(args, device_type, cast_inputs), **_cast(kwargs, device_type, cast_inputs))
    return decorate_fwd


def custom_bwd(bwd=None, *, device_type):
    """torch.amp.custom_bwd: the backward runs under the autocast state its forward ran under."""
    _check_device(device_type)
    if bwd is None:
        return functools.partial(custom_bwd, device_type=device_type)

    @functools.wraps(bwd)
    def decorate_bwd(*args, **kwargs):
        ctx = args[0]
        with autocast(device_type=device_type, enabled=ctx._fwd_used_autocast, dtype=ctx._dtype):
            return bwd(*args, **kwargs)
    return decorate_bwd

