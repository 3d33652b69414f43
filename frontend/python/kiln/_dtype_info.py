"""kiln.finfo and kiln.iinfo: the numeric limits of a dtype, as torch.finfo/torch.iinfo give
them (Python numbers; bfloat16's from its 8-bit exponent and 7-bit mantissa)."""
import numpy as np

from . import _C

_FLOAT_NUMPY = {"float16": np.float16, "float32": np.float32, "float64": np.float64}
_INT_NUMPY = {"uint8": np.uint8, "int8": np.int8, "int16": np.int16, "int32": np.int32, "int64": np.int64}


def _name(dtype):
    return str(dtype).split(".")[-1]


class finfo:  # noqa: N801 - torch's name
    _kiln_trace_constant = True  # made while tracing, it is a constant of the graph (frontend/capture)
    def __init__(self, type=None):  # noqa: A002 - torch's keyword
        name = _name(type if type is not None else _C._get_default_dtype())
        if name == "bfloat16":
            self.bits, self.eps, self.max = 16, 2.0 ** -7, float((2 - 2.0 ** -7) * 2.0 ** 127)
            self.tiny = self.smallest_normal = 2.0 ** -126
            self.resolution = 0.01
        elif name in _FLOAT_NUMPY:
            info = np.finfo(_FLOAT_NUMPY[name])
            self.bits, self.eps, self.max = info.bits, float(info.eps), float(info.max)
            self.tiny = self.smallest_normal = float(info.tiny)
            self.resolution = 10.0 ** -info.precision  # torch: a Python float, not the dtype's rounding
        else:
            raise TypeError(f"kiln.finfo() requires a floating point input type. Use kiln.iinfo to handle "
                            f"'kiln.{name}'")
        self.min = -self.max
        self.dtype = name

    def __repr__(self):
        return (f"finfo(resolution={self.resolution:g}, min={self.min:g}, max={self.max:g}, eps={self.eps:g}, "
                f"smallest_normal={self.smallest_normal:g}, tiny={self.tiny:g}, dtype={self.dtype})")


class iinfo:  # noqa: N801 - torch's name
    _kiln_trace_constant = True
    def __init__(self, type):  # noqa: A002 - torch's keyword
        name = _name(type)
        if name not in _INT_NUMPY:
            raise TypeError(f"kiln.iinfo() requires an integer input type. Use kiln.finfo to handle 'kiln.{name}'")
        info = np.iinfo(_INT_NUMPY[name])
        self.bits, self.min, self.max, self.dtype = info.bits, int(info.min), int(info.max), name

    def __repr__(self):
        return f"iinfo(min={self.min:g}, max={self.max:g}, dtype={self.dtype})"
