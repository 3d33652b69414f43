"""torch functions that real model code calls and that are compositions of table ops (no
kernel of their own): type predicates, broadcasting helpers, diagonal views and meshgrid, and
small math (count_nonzero, diff, aminmax, logaddexp(2), fix, hypot, xlogy, fmax/fmin, heaviside)."""
import collections
import math

from . import _C
from ._creation import tensor as _tensor
from ._tensor import Size as _Size


def is_tensor(obj):
    return isinstance(obj, _C.TensorBase)


def is_floating_point(input):
    return input.dtype.is_floating_point


def numel(input):
    return input.numel()


def broadcast_shapes(*shapes):
    """The shape tensors of these shapes broadcast to (ints are 1-D shapes), as PyTorch's."""
    out = []
    for shape in shapes:
        shape = (shape,) if isinstance(shape, int) else tuple(shape)
        for i in range(1, len(shape) + 1):
            if i > len(out):
                out.insert(0, shape[-i])
            elif out[-i] == 1:
                out[-i] = shape[-i]
            elif shape[-i] != 1 and shape[-i] != out[-i]:
                raise RuntimeError(f"Shape mismatch: objects cannot be broadcast to a single shape.  "
                                   f"Mismatch is between {tuple(out)} and {shape}")
    return _Size(out)


def broadcast_to(input, size):
    return input.expand(list(size))


def broadcast_tensors(*tensors):
    if len(tensors) == 1 and isinstance(tensors[0], (list, tuple)):
        tensors = tensors[0]
    shape = broadcast_shapes(*(t.shape for t in tensors))
    return tuple(t.expand(list(shape)) for t in tensors)  # a list: 0-d shapes too


def diagonal(input, offset=0, dim1=0, dim2=1):
    """The diagonal of the (dim1, dim2) planes as a view (as_strided over input's strides): a new
    last dimension, as PyTorch's."""
    nd = input.dim()
    if nd < 2:
        raise RuntimeError(f"diagonal dimensions requires ndim larger than 2, but got ndim={nd}")
    for d in (dim1, dim2):
        if not -nd <= d < nd:
            raise IndexError(f"Dimension out of range (expected to be in range of [{-nd}, {nd - 1}], but got {d})")
    d1, d2 = dim1 % nd, dim2 % nd
    if d1 == d2:
        raise RuntimeError(f"diagonal dimensions cannot be identical {dim1}, {dim2}")
    sizes, strides = list(input.shape), list(input.stride())
    start = input.storage_offset()
    if offset >= 0:
        n = max(min(sizes[d1], sizes[d2] - offset), 0)
        start += offset * strides[d2] if n else 0
    else:
        n = max(min(sizes[d1] + offset, sizes[d2]), 0)
        start += -offset * strides[d1] if n else 0
    keep = [d for d in range(nd) if d not in (d1, d2)]
    return input.as_strided([sizes[d] for d in keep] + [n], [strides[d] for d in keep] + [strides[d1] + strides[d2]], start)


def diag(input, diagonal=0):
    """A 1-D input: the square matrix with it on the `diagonal`-th diagonal; a 2-D input: that
    diagonal (a copy, as PyTorch's)."""
    if input.dim() == 1:
        return _diag_embed(input, input.shape[0] + abs(diagonal), diagonal)
    if input.dim() == 2:
        return globals()["diagonal"](input, diagonal).clone()
    raise RuntimeError(f"diag(): Supports 1D or 2D tensors. Got {input.dim()}D")


def _diag_embed(v, n, offset):
    # zeros with v on the offset-th diagonal, differentiable in v: v gathered along the rows
    # (columns below the main diagonal) where the diagonal runs, 0 elsewhere
    rows = _C._ops.arange(n).unsqueeze(1)
    cols = _C._ops.arange(n).unsqueeze(0)
    on = (cols - rows) == offset
    along = (rows if offset >= 0 else cols).expand(n, n).clamp(max=max(v.shape[0] - 1, 0))
    return _C._ops.where(on, v[along], v.new_zeros(()))


def meshgrid(*tensors, indexing="ij"):
    """Coordinate grids of 1-D tensors (indexing 'ij': matrix, 'xy': Cartesian), as views."""
    if len(tensors) == 1 and isinstance(tensors[0], (list, tuple)):
        tensors = tuple(tensors[0])
    if indexing not in ("ij", "xy"):
        raise RuntimeError(f"torch.meshgrid: indexing must be one of \"xy\" or \"ij\", but received: {indexing}")
    for t in tensors:
        if t.dim() > 1:
            raise RuntimeError(f"torch.meshgrid: Expected 0D or 1D tensor in the tensor list but got: {t.dim()}D")
    flat = [t.reshape(-1) for t in tensors]
    swap = indexing == "xy" and len(flat) >= 2
    if swap:
        flat[0], flat[1] = flat[1], flat[0]
    shape = [t.shape[0] for t in flat]
    grids = []
    for i, t in enumerate(flat):
        view = [1] * len(flat)
        view[i] = shape[i]
        grids.append(t.view(*view).expand(*shape))
    if swap:  # 'xy': the first two inputs swapped in and their grids swapped back out
        grids[0], grids[1] = grids[1], grids[0]
    return tuple(grids)


def count_nonzero(input, dim=None):
    return (input != 0).sum() if dim is None else (input != 0).sum(dim)


def diff(input, n=1, dim=-1, prepend=None, append=None):
    """The n-th forward difference along dim (of bools: whether neighbours differ), after
    concatenating prepend and append along it, as PyTorch's."""
    if input.dim() == 0:
        raise RuntimeError("diff expects input to be at least one-dimensional")
    if n < 0:
        raise RuntimeError(f"order must be non-negative but got {n}")
    parts = [t for t in (prepend, input, append) if t is not None]
    x = _C._ops.cat(parts, dim) if len(parts) > 1 else input
    for _ in range(n):
        length = x.shape[dim]
        if length == 0:
            break
        hi, lo = x.narrow(dim, 1, length - 1), x.narrow(dim, 0, length - 1)
        x = hi != lo if x.dtype == _C.bool else hi - lo
    return x


# aminmax's result, a named tuple (min, max) as torch.return_types.aminmax.
_aminmax = collections.namedtuple("aminmax", ["min", "max"])
_aminmax.__module__ = "kiln.return_types"


def aminmax(input, *, dim=None, keepdim=False):
    if dim is None:
        if input.numel() == 0:
            raise RuntimeError("aminmax(): cannot compute aminmax over an empty dimension as the operation has no "
                               "identity.")
        lo, hi = input.amin(), input.amax()
        if keepdim:
            shape = [1] * input.dim()
            lo, hi = lo.reshape(shape), hi.reshape(shape)
        return _aminmax(lo, hi)
    return _aminmax(input.amin(dim, keepdim), input.amax(dim, keepdim))


def _float_only(op, *tensors):
    for t in tensors:
        if is_tensor(t) and not t.dtype.is_floating_point:
            raise RuntimeError(f"\"{op}_cpu\" not implemented for '{t.dtype}'")


def logaddexp(input, other):
    """log(exp(a) + exp(b)) without overflow; equal infinities give themselves (not nan)."""
    _float_only("logaddexp", input, other)
    hi = _C._ops.maximum(input, other)
    both_inf = _C._ops.isinf(input) & (input == other)
    return _C._ops.where(both_inf, input, hi + (-(input - other).abs()).exp().log1p())


def logaddexp2(input, other):
    """log2(2**a + 2**b) without overflow; equal infinities give themselves (not nan)."""
    _float_only("logaddexp2", input, other)
    hi = _C._ops.maximum(input, other)
    both_inf = _C._ops.isinf(input) & (input == other)
    return _C._ops.where(both_inf, input, hi + (-(input - other).abs()).exp2().log1p() * (1 / math.log(2)))


def fix(input):
    """trunc's other name."""
    return input.trunc()


def hypot(input, other):
    _float_only("hypot", input, other)
    return (input * input + other * other).sqrt()


def xlogy(input, other):
    """input * log(other), 0 where input is 0 (even where other is 0), nan where other is nan."""
    if is_tensor(other):
        log = other.log()
    else:
        log = math.log(other) if other > 0 else (-math.inf if other == 0 else math.nan)
    out = input * log
    zero = input == 0 if is_tensor(input) else _C._ops.full_like(out, input == 0, dtype=_C.bool)
    out = _C._ops.where(zero, out.new_zeros(()), out)
    if is_tensor(other):
        return _C._ops.where(_C._ops.isnan(other), other, out).to(out.dtype)
    return _C._ops.full_like(out, math.nan) if math.isnan(other) else out


def fmax(input, other):
    """maximum that ignores a nan (nan only where both are)."""
    out = _C._ops.maximum(input, other)
    return _C._ops.where(_C._ops.isnan(input), other, _C._ops.where(_C._ops.isnan(other), input, out)).to(out.dtype)


def fmin(input, other):
    out = _C._ops.minimum(input, other)
    return _C._ops.where(_C._ops.isnan(input), other, _C._ops.where(_C._ops.isnan(other), input, out)).to(out.dtype)


def heaviside(input, values):
    if input.dtype != values.dtype:
        raise RuntimeError("heaviside is not yet implemented for tensors with different dtypes")
    return _C._ops.where(input == 0, values, (input > 0).to(input.dtype)).to(input.dtype)


def _install_methods(tensor_class):
    for fn in (count_nonzero, diff, aminmax, logaddexp, logaddexp2, fix, hypot, xlogy, fmax, fmin, heaviside):
        setattr(tensor_class, fn.__name__, fn)
    tensor_class.diagonal = diagonal
    tensor_class.diag = diag
    tensor_class.broadcast_to = broadcast_to
    tensor_class.is_floating_point = is_floating_point
