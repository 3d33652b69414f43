"""kiln.ops (torch.ops): the operator namespaces. `kiln.ops.aten.<op>` is kiln's op of that
name (kiln._C._ops.<op>, which dispatches on its arguments as an overload packet does:
`kiln.ops.aten.add(x, y)`, `kiln.ops.aten.add.Tensor` names the same op). Libraries of custom
C++ operators built for PyTorch (torchvision's _C.so) cannot be loaded: load_library raises
OSError, which such libraries treat as "no compiled ops" (torchvision then runs without nms,
roi_align and the other ops of its extension)."""
from . import _C


class _OpPacket:
    """One op of the aten namespace; attributes name its overloads (all the same callable here)."""

    def __init__(self, name, fn):
        self._name, self._fn = name, fn

    def __call__(self, *args, **kwargs):
        return self._fn(*args, **kwargs)

    def __getattr__(self, overload):
        if overload.startswith("__"):
            raise AttributeError(overload)
        return self._fn  # add.Tensor, add.Scalar, ...: kiln's op resolves the overload itself

    def __repr__(self):
        return f"kiln.ops.aten.{self._name}"


class _Aten:
    def __getattr__(self, name):
        fn = getattr(_C._ops, name, None)
        if fn is None:
            raise AttributeError(f"kiln.ops.aten has no op named {name!r}")
        return _OpPacket(name, fn)


aten = _Aten()


def load_library(path):
    """torch.ops.load_library: refused, as kiln cannot run operators compiled against libtorch."""
    raise OSError(f"kiln.ops.load_library({path!r}): kiln cannot load C++ operator libraries built for "
                  "PyTorch")


def __getattr__(namespace):
    if namespace.startswith("__"):
        raise AttributeError(namespace)
    raise AttributeError(f"kiln.ops has no operator namespace {namespace!r} (only aten: custom C++ operator "
                         "libraries built for PyTorch cannot be loaded)")
