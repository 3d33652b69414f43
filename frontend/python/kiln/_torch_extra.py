"""torch.* functions model code and scripts call that kiln lacked, as compositions of what kiln
has: top-level aliases of nn.functional ops that torch exports with the same signature
(torch.conv2d, torch.max_pool2d, torch.selu, ...), torch.batch_norm / group_norm /
instance_norm with torch's own argument orders, the linear-algebra conveniences (addr, addbmm,
inner, vdot, diagflat, matrix_power, chain_matmul), unravel_index, gradient, mvlgamma, range,
fill, asarray, frombuffer, typename, is_nonzero / is_signed / is_same_size, get_device,
to_dlpack, set_default_tensor_type and the process settings scripts set at startup."""
import functools
import itertools
import math
import operator
import warnings

from . import _C

_ops = _C._ops


def _F():
    from .nn import functional
    return functional


def _alias(name):
    @functools.wraps(getattr(_F(), name))
    def call(*args, **kwargs):
        return getattr(_F(), name)(*args, **kwargs)
    return call


# nn.functional ops torch also exports at the top level with the same positional arguments.
FUNCTIONAL_ALIASES = (
    "conv1d", "conv2d", "conv3d", "conv_transpose1d", "conv_transpose2d", "conv_transpose3d", "cosine_similarity",
    "pairwise_distance", "pixel_shuffle", "pixel_unshuffle", "max_pool1d", "max_pool2d", "max_pool3d",
    "max_pool1d_with_indices", "avg_pool1d", "adaptive_avg_pool1d", "prelu", "selu", "celu", "threshold", "rrelu",
    "hardshrink", "bilinear", "alpha_dropout", "feature_alpha_dropout", "channel_shuffle", "pdist",
)


def batch_norm(input, weight, bias, running_mean, running_var, training, momentum, eps, cudnn_enabled=True):
    """torch.batch_norm's argument order (weight and bias first; F.batch_norm's is the stats)."""
    return _F().batch_norm(input, running_mean, running_var, weight, bias, training, momentum, eps)


def group_norm(input, num_groups, weight=None, bias=None, eps=1e-5, cudnn_enabled=True):
    return _F().group_norm(input, num_groups, weight, bias, eps)


def instance_norm(input, weight, bias, running_mean, running_var, use_input_stats, momentum, eps, cudnn_enabled=True):
    return _F().instance_norm(input, running_mean, running_var, weight, bias, use_input_stats, momentum, eps)


def addr(input, vec1, vec2, *, beta=1, alpha=1):
    """beta * input + alpha * outer(vec1, vec2) (input not read where beta is 0, as torch)."""
    if vec1.dim() != 1 or vec2.dim() != 1:
        raise RuntimeError(f"addr: Expected 1-D argument vec1, but got {vec1.dim()}-D" if vec1.dim() != 1 else
                           f"addr: Expected 1-D argument vec2, but got {vec2.dim()}-D")
    product = vec1.outer(vec2)
    product = product if alpha == 1 else product * alpha
    if beta == 0:
        from . import broadcast_shapes
        return product.expand(broadcast_shapes(input.shape, product.shape)).clone()
    return (input if beta == 1 else input * beta) + product


def addbmm(input, batch1, batch2, *, beta=1, alpha=1):
    """beta * input + alpha * the sum over the batch of batch1[i] @ batch2[i]."""
    if batch1.dim() != 3 or batch2.dim() != 3:
        raise RuntimeError("batch1 must be a 3D tensor" if batch1.dim() != 3 else "batch2 must be a 3D tensor")
    product = batch1.bmm(batch2).sum(0)
    product = product if alpha == 1 else product * alpha
    if beta == 0:
        return product
    return (input if beta == 1 else input * beta) + product


def inner(input, other):
    """The sum over the last dims of input and other of their products (a scalar operand scales)."""
    if input.dim() == 0 or other.dim() == 0:
        return input * other
    if input.shape[-1] != other.shape[-1]:
        raise RuntimeError(f"inner() the last dimension must match on both input tensors but got shapes "
                           f"{list(input.shape)} and {list(other.shape)}")
    from . import tensordot
    return tensordot(input, other, ([input.dim() - 1], [other.dim() - 1]))


def vdot(input, other):
    """The dot product of two 1-D tensors, the first conjugated."""
    if input.dim() != 1 or other.dim() != 1:
        raise RuntimeError(f"1D tensors expected, but got {input.dim()}D and {other.dim()}D tensors")
    if input.dtype.is_complex or other.dtype.is_complex:
        return (input.conj() * other).sum()
    return input.dot(other)


def diagflat(input, offset=0):
    from . import diag
    return diag(input.reshape(-1), offset)


def matrix_power(input, n):
    """input @ input @ ... (n times; the identity for 0, powers of the inverse for n < 0), by
    repeated squaring."""
    if input.dim() < 2 or input.shape[-1] != input.shape[-2]:
        raise RuntimeError(f"linalg.matrix_power: A must be batches of square matrices, but they are "
                           f"{input.shape[-2] if input.dim() >= 2 else 1} by {input.shape[-1] if input.dim() else 1} matrices")
    if n == 0:
        eye = _ops.eye(input.shape[-1], dtype=input.dtype, device=input.device)
        return eye.expand(input.shape).clone()
    base = input
    if n < 0:
        from .linalg import inv
        base, n = inv(input), -n
    result = None
    while n:
        if n & 1:
            result = base if result is None else result @ base
        n >>= 1
        if n:
            base = base @ base
    return result


def chain_matmul(*matrices, out=None):
    warnings.warn("torch.chain_matmul is deprecated and will be removed in a future PyTorch release. Use "
                  "torch.linalg.multi_dot instead, which accepts a list of two or more tensors rather than multiple "
                  "parameters.")
    if len(matrices) == 1:
        return matrices[0].clone()
    return functools.reduce(lambda a, b: a @ b, matrices)


def unravel_index(indices, shape):
    """The coordinates in a tensor of `shape` of each flat index, as a tuple of tensors (index
    values out of range wrap as torch's floor_divide / remainder make them)."""
    if indices.dtype.is_floating_point or indices.dtype.is_complex or indices.dtype == _C.bool:
        raise TypeError(f"expected 'indices' to be integer dtype, but got {indices.dtype}")
    if isinstance(shape, int):
        shape = [shape]
    else:
        for dim in shape:
            if not isinstance(dim, int):
                raise TypeError(f"expected 'shape' sequence to only contain ints, but got {type(dim)}")
        shape = list(shape)
    if any(dim < 0 for dim in shape):
        raise ValueError(f"'shape' cannot have negative values, but got {tuple(shape)}")
    coefs = list(reversed(list(itertools.accumulate(reversed(shape[1:] + [1]), func=operator.mul))))
    from ._creation import tensor
    res = indices.unsqueeze(-1).floor_divide(tensor(coefs, dtype=_C.int64, device=indices.device)) % \
        tensor(shape, dtype=_C.int64, device=indices.device)
    return res.unbind(-1)


def gradient(input, *, spacing=1, dim=None, edge_order=1):
    """numpy.gradient: central differences inside, one-sided (first or second order) at the edges,
    for uniform spacing (a number, or one per dim); a tuple, one tensor per dim."""
    if edge_order not in (1, 2):
        raise RuntimeError("torch.gradient only supports edge_order=1 and edge_order=2.")
    dims = list(range(input.dim())) if dim is None else [dim] if isinstance(dim, int) else list(dim)
    dims = [d % input.dim() for d in dims]
    if isinstance(spacing, (int, float)):
        spacing = [float(spacing)] * len(dims)
    else:
        spacing = list(spacing)
        if len(spacing) != len(dims):
            raise RuntimeError(f"torch.gradient expected spacing to be unspecified, a scalar or it's spacing and dim "
                               f"arguments to have the same length, but got a spacing argument of length {len(spacing)} "
                               f"and a dim argument of length {len(dims)}.")
        if any(not isinstance(h, (int, float)) for h in spacing):
            raise NotImplementedError("kiln.gradient: coordinate tensors as spacing are not supported (numbers are)")
    x = input if input.dtype.is_floating_point or input.dtype.is_complex else input.to(_C.float32)
    out = []
    for d, h in zip(dims, spacing):
        n = x.shape[d]
        if n < edge_order + 1:
            raise RuntimeError("torch.gradient expected each dimension size to be at least edge_order+1")
        interior = (x.narrow(d, 2, n - 2) - x.narrow(d, 0, n - 2)) / (2 * h)
        if edge_order == 1:
            first = (x.narrow(d, 1, 1) - x.narrow(d, 0, 1)) / h
            last = (x.narrow(d, n - 1, 1) - x.narrow(d, n - 2, 1)) / h
        else:
            first = (-1.5 * x.narrow(d, 0, 1) + 2 * x.narrow(d, 1, 1) - 0.5 * x.narrow(d, 2, 1)) / h
            last = (0.5 * x.narrow(d, n - 3, 1) - 2 * x.narrow(d, n - 2, 1) + 1.5 * x.narrow(d, n - 1, 1)) / h
        out.append(_ops.cat([first, interior, last], d))
    return tuple(out)


def mvlgamma(input, p):
    """The multivariate log-gamma of dimension p: sum_i lgamma(x - i/2) + p(p-1)/4 log(pi)."""
    if p < 1:
        raise RuntimeError("p has to be greater than or equal to 1")
    if not bool((input > (p - 1) / 2).all()):
        raise RuntimeError("All elements must be greater than (p-1)/2")
    from .special import gammaln
    terms = _ops.stack([gammaln(input - i / 2) for i in range(p)]).sum(0)
    return terms + p * (p - 1) / 4 * math.log(math.pi)


def range_(start=0, end=None, step=1, *, dtype=None, device=None, requires_grad=False):
    """Deprecated torch.range (kiln.range; named range_ here, where `range` is the builtin): start,
    start + step, ... up to and including end (default float)."""
    warnings.warn("torch.range is deprecated and will be removed in a future release because its behavior is "
                  "inconsistent with Python's range builtin. Instead, use torch.arange, which produces values in "
                  "[start, end).")
    if end is None:
        start, end = 0, start
    from ._settings import get_default_dtype
    count = int(math.floor((end - start) / step)) + 1
    values = _ops.arange(count, dtype=_C.float64, device=device) * step + start
    return values.to(dtype or get_default_dtype()).requires_grad_(requires_grad)


def fill(input, value):
    """A new tensor like input, every element `value` (torch.fill, the functional fill_)."""
    return _ops.full_like(input, value)


def asarray(obj, *, dtype=None, device=None, copy=None, requires_grad=False):
    """A tensor from a tensor, a numpy array, a buffer or nested sequences, sharing memory where it
    can (no dtype or device change and copy not True), as torch.asarray."""
    import numpy as np
    from . import _tensor, from_numpy, tensor
    if isinstance(obj, _tensor.Tensor):
        out = obj
        if dtype is not None or device is not None:
            out = out.to(dtype=dtype, device=device, copy=bool(copy))
        elif copy:
            out = out.clone()
    elif isinstance(obj, np.ndarray) and copy is not True and obj.dtype.kind in "biuf?" and obj.dtype.isnative:
        out = from_numpy(obj)
        if dtype is not None or device is not None:
            out = out.to(dtype=dtype, device=device)
    else:
        if copy is False and not isinstance(obj, (list, tuple, int, float, bool, complex)):
            raise ValueError("can't alias the object without copying it")
        out = tensor(obj, dtype=dtype, device=device)
    return out.requires_grad_(requires_grad) if requires_grad else out


def frombuffer(buffer, *, dtype, count=-1, offset=0, requires_grad=False):
    """A 1-D tensor over a Python buffer's memory (shared, as torch.frombuffer)."""
    import numpy as np
    from . import from_numpy
    from ._traced_numpy import numpy_dtype
    arr = np.frombuffer(buffer, dtype=numpy_dtype(dtype), count=count, offset=offset)
    return from_numpy(arr).requires_grad_(requires_grad) if requires_grad else from_numpy(arr)


def typename(obj):
    """The type name torch.typename gives: a tensor's type() ("kiln.FloatTensor"), else the
    object's module and qualified name."""
    from ._tensor import Tensor
    if isinstance(obj, Tensor):
        return obj.type()
    module = getattr(obj, "__module__", "") or ""
    name = getattr(obj, "__qualname__", None) or getattr(obj, "__name__", None) or type(obj).__qualname__
    if not hasattr(obj, "__qualname__") and not hasattr(obj, "__name__"):
        module, name = type(obj).__module__, type(obj).__qualname__
    return f"{module}.{name}" if module and module != "builtins" else name


def is_nonzero(input):
    if input.numel() == 0:
        raise RuntimeError("Boolean value of Tensor with no values is ambiguous")
    if input.numel() > 1:
        raise RuntimeError("Boolean value of Tensor with more than one value is ambiguous")
    return bool(input.reshape(()).item() != 0)


def is_signed(input):
    return input.dtype.is_signed


def is_same_size(input, other):
    return tuple(input.shape) == tuple(other.shape)


def get_device(input):
    """-1 for a CPU tensor, the device index of a CUDA one."""
    return -1 if input.device.type == "cpu" else (input.device.index or 0)


def to_dlpack(tensor):
    return tensor.__dlpack__()


def set_default_tensor_type(t):
    """Deprecated: the default dtype from a tensor type ("torch.DoubleTensor" / kiln.DoubleTensor)."""
    warnings.warn("torch.set_default_tensor_type() is deprecated as of PyTorch 2.1, please use "
                  "torch.set_default_dtype() and torch.set_default_device() as alternatives.")
    name = t if isinstance(t, str) else getattr(t, "__name__", str(t))
    kinds = {"FloatTensor": _C.float32, "DoubleTensor": _C.float64, "HalfTensor": _C.float16,
             "BFloat16Tensor": _C.bfloat16}
    kind = name.split(".")[-1]
    if kind not in kinds:
        raise TypeError("only floating-point types are supported as the default type")
    from ._settings import set_default_dtype
    set_default_dtype(kinds[kind])


_interop_threads = 1


def get_num_interop_threads():
    """kiln runs ops one after another on the calling thread (no inter-op pool): 1, or what
    set_num_interop_threads recorded."""
    return _interop_threads


def set_num_interop_threads(n):
    """Records n (get_num_interop_threads returns it); kiln has no inter-op thread pool for it to
    size, ops run on the calling thread (their intra-op threads: set_num_threads)."""
    global _interop_threads
    if int(n) < 1:
        raise RuntimeError("Expected positive number of threads")
    _interop_threads = int(n)


def set_flush_denormal(mode):
    """False: kiln does not switch the CPU's flush-to-zero mode (torch returns False where it
    cannot either); denormals are computed as IEEE says."""
    return False
