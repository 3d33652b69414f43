"""Padding modules (ConstantPad, ZeroPad, ReflectionPad, ReplicationPad, CircularPad in 1-3d) over F.pad."""
from .. import functional as F
from .module import Module


def _pairs(padding, n):
    """An int pads every side; a tuple gives (left, right, top, bottom, front, back)."""
    if isinstance(padding, int):
        return (padding,) * (2 * n)
    padding = tuple(padding)
    if len(padding) != 2 * n:
        raise ValueError(f"expected padding of {2 * n} values, got {padding}")
    return padding


class _PadNd(Module):
    mode = "constant"
    dims = 1

    def __init__(self, padding):
        super().__init__()
        self.padding = _pairs(padding, self.dims)

    def forward(self, input):
        return F.pad(input, self.padding, self.mode)

    def extra_repr(self):
        return f"{self.padding}"


class _ConstantPadNd(_PadNd):
    def __init__(self, padding, value):
        super().__init__(padding)
        self.value = value

    def forward(self, input):
        return F.pad(input, self.padding, "constant", self.value)

    def extra_repr(self):
        return f"padding={self.padding}, value={self.value}"


class _ZeroPadNd(_ConstantPadNd):
    def __init__(self, padding):
        super().__init__(padding, 0.0)

    def extra_repr(self):
        return f"{self.padding}"


def _padding_class(name, base, mode, dims):
    return type(name, (base,), {"mode": mode, "dims": dims, "__module__": __name__})


ConstantPad1d, ConstantPad2d, ConstantPad3d = (
    _padding_class(f"ConstantPad{d}d", _ConstantPadNd, "constant", d) for d in (1, 2, 3))
ZeroPad1d, ZeroPad2d, ZeroPad3d = (
    _padding_class(f"ZeroPad{d}d", _ZeroPadNd, "constant", d) for d in (1, 2, 3))
ReflectionPad1d, ReflectionPad2d, ReflectionPad3d = (
    _padding_class(f"ReflectionPad{d}d", _PadNd, "reflect", d) for d in (1, 2, 3))
ReplicationPad1d, ReplicationPad2d, ReplicationPad3d = (
    _padding_class(f"ReplicationPad{d}d", _PadNd, "replicate", d) for d in (1, 2, 3))
CircularPad1d, CircularPad2d, CircularPad3d = (
    _padding_class(f"CircularPad{d}d", _PadNd, "circular", d) for d in (1, 2, 3))
