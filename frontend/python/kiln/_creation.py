"""kiln.tensor, kiln.as_tensor and kiln.from_dlpack: tensors from Python data (nested lists,
numbers, numpy arrays, tensors) and from other libraries' arrays."""
from . import _C, _complex

_GRAD_DTYPES_ERROR = "Only Tensors of floating point and complex dtype can require gradients"


def _is_numpy_array(data):
    cls = type(data)
    return cls.__name__ == "ndarray" and cls.__module__ == "numpy"


def _as_device(device):
    return device if isinstance(device, _C.device) else _C.device(device)


def tensor(data, *, dtype=None, device=None, requires_grad=False, pin_memory=False):
    """A new tensor holding a copy of `data`, with torch.tensor's dtype inference: bools give
    bool, ints int64, floats float32, numpy arrays and tensors keep their dtype, mixtures promote."""
    if dtype is complex:  # Python's type, as torch reads it
        dtype = _complex.complex128
    if getattr(dtype, "is_complex", False) or (_is_numpy_array(data) and data.dtype.kind == "c"):
        t = _complex.complex_from_data(data, dtype)
    else:
        try:
            t = _C._tensor_from_data(data, dtype)
        except (TypeError, NotImplementedError):  # complex numbers (the C++ converter takes real ones)
            if not _complex.is_complex_data(data, dtype):
                raise
            t = _complex.complex_from_data(data, dtype)
    # Made on the CPU: no copy (no op at all) when that is where it goes. Under capture, an op on
    # a tensor made from Python data inside this call is refused (it would be baked in), so
    # `kiln.tensor(data, device=x.device)` broke the graph for a CPU x.
    if device is None:
        device = _C._get_default_device()  # set_default_device / `with kiln.device(...)`
    if _as_device(device) != t.device:
        t = t.to(device=device)
    if requires_grad:
        if not (t.dtype.is_floating_point or t.dtype.is_complex):
            raise RuntimeError(_GRAD_DTYPES_ERROR)
        t.requires_grad = True
    return t


def as_tensor(data, dtype=None, device=None):
    """`data` as a tensor without copying where possible: a tensor or numpy array of the right
    dtype and device is shared, anything else is converted as kiln.tensor does."""
    if isinstance(data, _C.TensorBase):
        return data.to(dtype=dtype, device=device)
    if _is_numpy_array(data):
        return _C.from_numpy(data).to(dtype=dtype, device=device)
    return tensor(data, dtype=dtype, device=device)


_DL_CPU = 1


def from_dlpack(ext_tensor):
    """A tensor sharing the memory of `ext_tensor`: any object with __dlpack__ (numpy arrays,
    PyTorch tensors, ...) or a DLPack capsule. Only CPU memory can be imported."""
    if not hasattr(ext_tensor, "__dlpack__"):
        return _C._from_dlpack(ext_tensor)
    device_type, _ = ext_tensor.__dlpack_device__()
    if device_type != _DL_CPU:
        raise RuntimeError(f"from_dlpack: only CPU arrays can be imported, got DLPack device type {int(device_type)}")
    try:
        capsule = ext_tensor.__dlpack__(max_version=(1, 0))
    except TypeError:  # a producer older than DLPack 1.0 (no max_version)
        capsule = ext_tensor.__dlpack__()
    return _C._from_dlpack(capsule)


def logspace(start, end, steps, base=10.0, *, dtype=None, device=None, requires_grad=False):
    """base ** linspace(start, end, steps), the exponents computed in double as torch's kernel
    does (the first half counted up from start, the second down from end)."""
    if steps < 0:
        raise RuntimeError("number of steps must be non-negative")
    from ._settings import get_default_dtype
    dtype = dtype or get_default_dtype()
    i = _C._ops.arange(steps, dtype=_C.float64, device=device)
    step = (end - start) / (steps - 1) if steps > 1 else 0.0
    exponent = _C._ops.where(i < steps // 2, start + step * i, end - step * (steps - 1 - i)) if steps > 1 else i + start
    out = _C._ops.pow(float(base), exponent)
    out = out.to(dtype)
    return out.requires_grad_() if requires_grad else out
