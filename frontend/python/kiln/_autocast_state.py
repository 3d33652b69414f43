"""torch's top-level autocast state functions (torch.get_autocast_dtype & co): the thread's
autocast state per device type, which kiln.autocast sets (runtime/Autocast.h)."""
import functools

from . import _C

_DEVICES = ("cpu", "cuda")


def set_autocast_enabled(device_type, enabled=None):
    if enabled is None:  # the deprecated one-argument form: set_autocast_enabled(enabled), CUDA
        device_type, enabled = "cuda", device_type
    _C._set_autocast_enabled(device_type, bool(enabled))


def get_autocast_dtype(device_type):
    return _C._get_autocast_dtype(device_type)


def set_autocast_dtype(device_type, dtype):
    _C._set_autocast_dtype(device_type, dtype)


def is_autocast_cpu_enabled():
    return _C._is_autocast_enabled("cpu")


def set_autocast_cpu_enabled(enabled):
    _C._set_autocast_enabled("cpu", bool(enabled))


def get_autocast_cpu_dtype():
    return _C._get_autocast_dtype("cpu")


def set_autocast_cpu_dtype(dtype):
    _C._set_autocast_dtype("cpu", dtype)


def get_autocast_gpu_dtype():
    return _C._get_autocast_dtype("cuda")


def is_autocast_cache_enabled():
    return _C._is_autocast_cache_enabled()


def set_autocast_cache_enabled(enabled):
    _C._set_autocast_cache_enabled(bool(enabled))


def clear_autocast_cache():
    _C._clear_autocast_cache()


def autocast_increment_nesting():
    return _C._autocast_increment_nesting()


def autocast_decrement_nesting():
    return _C._autocast_decrement_nesting()


def _cast(value, device_type, dtype):
    if isinstance(value, _C.TensorBase):
        eligible = value.is_floating_point() and value.dtype != _C.float64 and value.device.type == device_type
        return value.to(dtype) if eligible else value
    if isinstance(value, (list, tuple)):
        return type(value)(_cast(v, device_type, dtype) for v in value)
    if isinstance(value, dict):
        return {k: _cast(v, device_type, dtype) for k, v in value.items()}
    return value


def _autocast_float32(fn):
    """For ops kiln writes in Python that torch's autocast runs in float32 (losses, cdist,
    linear algebra, reflection/replication padding): under autocast, their floating inputs are
    cast to float32 and they run with autocast off, as the listed C++ ops do (runtime/Autocast.cpp)."""
    @functools.wraps(fn)
    def wrapper(*args, **kwargs):
        on = [d for d in _DEVICES if _C._is_autocast_enabled(d)]
        if not on:
            return fn(*args, **kwargs)
        for d in on:
            args, kwargs = _cast(args, d, _C.float32), _cast(kwargs, d, _C.float32)
        saved = [(d, _C._is_autocast_enabled(d)) for d in on]
        try:
            for d in on:
                _C._set_autocast_enabled(d, False)
            return fn(*args, **kwargs)
        finally:
            for d, was in saved:
                _C._set_autocast_enabled(d, was)
    return wrapper
