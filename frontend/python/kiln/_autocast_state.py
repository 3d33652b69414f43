"""torch's top-level autocast state functions (torch.get_autocast_dtype & co): the thread's
autocast state per device type, which kiln.autocast sets (runtime/Autocast.h)."""
from . import _C


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
