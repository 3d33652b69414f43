"""kiln.tensor and kiln.as_tensor: tensors from Python data (nested lists, numbers, numpy, tensors)."""
from . import _C

_GRAD_DTYPES_ERROR = "Only Tensors of floating point and complex dtype can require gradients"


def _is_numpy_array(data):
    cls = type(data)
    return cls.__name__ == "ndarray" and cls.__module__ == "numpy"


def tensor(data, *, dtype=None, device=None, requires_grad=False, pin_memory=False):
    """A new tensor holding a copy of `data`, with torch.tensor's dtype inference: bools give
    bool, ints int64, floats float32, numpy arrays and tensors keep their dtype, mixtures promote."""
    t = _C._tensor_from_data(data, dtype)
    if device is not None:
        t = t.to(device=device)
    if requires_grad:
        if not t.dtype.is_floating_point:
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
