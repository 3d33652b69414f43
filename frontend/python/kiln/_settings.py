"""Process-wide settings training scripts set at start-up, as torch's functions of the same
names: threads, float32 matmul precision, deterministic algorithms, the default dtype and device."""
import functools

from . import _C, _compiling
from .backends import cuda as _backends_cuda

__all__ = ["get_num_threads", "set_num_threads", "get_float32_matmul_precision",
           "set_float32_matmul_precision", "use_deterministic_algorithms",
           "are_deterministic_algorithms_enabled", "is_deterministic_algorithms_warn_only_enabled",
           "get_default_dtype", "set_default_dtype", "get_default_device", "set_default_device"]

get_num_threads = _C.get_num_threads
set_num_threads = _C.set_num_threads

_PRECISIONS = ("highest", "high", "medium")


@functools.partial(_compiling.not_traced, reason="kiln.set_float32_matmul_precision() (a global setting the graph cannot replay)")
def set_float32_matmul_precision(precision):
    """"highest" (the default), "high" or "medium", as torch's. It sets
    kiln.backends.cuda.matmul.allow_tf32 as torch does (torch 2.13 leaves cudnn.allow_tf32 alone:
    "highest" after "high" had switched cudnn's off, unlike torch); kiln's GEMMs compute
    f32 products in full f32 precision at every setting (no TF32 or bf16 passes)."""
    if precision not in _PRECISIONS:
        raise RuntimeError(f"Invalid precision: {precision!r}; expected one of {', '.join(_PRECISIONS)}")
    _backends_cuda.matmul.allow_tf32 = precision != "highest"
    global _precision
    _precision = precision


_precision = "highest"


def get_float32_matmul_precision():
    return _precision


_deterministic = False
_warn_only = False


@functools.partial(_compiling.not_traced, reason="kiln.use_deterministic_algorithms() (a global setting the graph cannot replay)")
def use_deterministic_algorithms(mode, *, warn_only=False):
    """Recorded as torch records it. kiln has no nondeterministic kernels to refuse: its CPU
    reductions and scatters give the same result run to run, and a graph compiles to the same
    kernels each time."""
    global _deterministic, _warn_only
    _deterministic, _warn_only = bool(mode), bool(warn_only)


def are_deterministic_algorithms_enabled():
    return _deterministic


def is_deterministic_algorithms_warn_only_enabled():
    return _warn_only


def get_default_dtype():
    """The dtype of floating-point values made without one: float32 unless set_default_dtype."""
    return _C._get_default_dtype()


@functools.partial(_compiling.not_traced, reason="kiln.set_default_dtype() (a global setting the graph cannot replay)")
def set_default_dtype(d):
    """torch.set_default_dtype: the dtype factories (kiln.zeros, kiln.randn, nn.Linear's weights),
    kiln.tensor of Python floats, true division of integers and Python float operands give, and
    with it the default complex dtype (complex128 for float64, complex64 otherwise). Compiled
    graphs are guarded on it."""
    if not isinstance(d, _C.dtype) or not d.is_floating_point:
        raise TypeError(f"only floating-point types are supported as the default type, got {d}")
    _C._set_default_dtype(d)


def get_default_device():
    """The device factories (kiln.zeros, kiln.randn, kiln.tensor, ...) make tensors on when given no
    device=: the CPU unless set_default_device or a `with kiln.device(...)` block says otherwise."""
    return _C._get_default_device()


@functools.partial(_compiling.not_traced, reason="kiln.set_default_device() (a global setting the graph cannot replay)")
def set_default_device(device):
    """Makes `device` (a kiln.device, a string such as "meta" or "cuda:0", or None for the CPU)
    the default of factories that create tensors from nothing; *_like factories and conversions
    keep their input's device, as in PyTorch."""
    _C._set_default_device(device)
