"""More torch functions that model code and training utilities call, composed of table ops (no
kernel of their own): stacking and splitting (tile, hstack/vstack/dstack/column_stack,
tensor_split/hsplit/vsplit, atleast_*d, ravel, rot90), gathers (take_along_dim), small linear
algebra (trace, kron, cdist, tril/triu_indices, cartesian_prod, diag_embed) and math (logit,
frac, sgn, copysign, float_power, nansum, nanmean). Each follows torch's shapes, dtypes and
errors; gradients come from the ops they are made of."""
import math

import numpy as _np

from . import _C
from ._composites import _float_only, broadcast_shapes, is_tensor, meshgrid

_ops = _C._ops


def _seq(tensors, name):
    if is_tensor(tensors):
        raise TypeError(f"{name}(): argument 'tensors' must be tuple of Tensors, not Tensor")
    tensors = list(tensors)
    if not tensors:
        raise RuntimeError(f"{name} expects a non-empty TensorList")
    return tensors


def _atleast(nd, tensors):
    def one(t):
        if t.dim() >= nd:
            return t
        if nd == 1 or t.dim() == 0 and nd == 1:
            return t.reshape(1)
        if nd == 2:
            return t.reshape(1, 1) if t.dim() == 0 else t.unsqueeze(0)
        if t.dim() == 0:
            return t.reshape(1, 1, 1)
        return t.reshape(1, -1, 1) if t.dim() == 1 else t.unsqueeze(-1)
    if len(tensors) == 1 and not is_tensor(tensors[0]):
        return tuple(one(t) for t in tensors[0])
    return one(tensors[0]) if len(tensors) == 1 else tuple(one(t) for t in tensors)


def atleast_1d(*tensors):
    return _atleast(1, tensors)


def atleast_2d(*tensors):
    return _atleast(2, tensors)


def atleast_3d(*tensors):
    return _atleast(3, tensors)


def hstack(tensors):
    tensors = [atleast_1d(t) for t in _seq(tensors, "hstack")]
    return _ops.cat(tensors, 0 if tensors[0].dim() == 1 else 1)


def vstack(tensors):
    return _ops.cat([atleast_2d(t) for t in _seq(tensors, "vstack")], 0)


row_stack = vstack


def dstack(tensors):
    return _ops.cat([atleast_3d(t) for t in _seq(tensors, "dstack")], 2)


def column_stack(tensors):
    tensors = _seq(tensors, "column_stack")
    return _ops.cat([t.reshape(t.numel(), 1) if t.dim() <= 1 else t for t in tensors], 1)


def tile(input, dims):
    """repeat() after padding dims with leading 1s to input's rank."""
    dims = [int(d) for d in dims]
    return input.repeat(*([1] * (input.dim() - len(dims)) + dims))


def ravel(input):
    return input.reshape(-1)


def tensor_split(input, indices_or_sections, dim=0):
    """Views of input split into n near-equal parts (the first size % n one longer) or at the
    given indices, along dim."""
    if input.dim() == 0:
        raise RuntimeError("tensor_split expected at least a 1-dimensional tensor, but got a tensor with 0 dims")
    d = dim % input.dim()
    length = input.shape[d]
    if is_tensor(indices_or_sections):
        if indices_or_sections.dtype != _C.int64:
            raise RuntimeError("tensor_split expected tensor_indices_or_sections to have integer dtype, but got "
                               f"{indices_or_sections.dtype}")
        if indices_or_sections.dim() > 1:
            raise RuntimeError("tensor_split expected tensor_indices_or_sections to be a zero-dimensional or "
                               f"one-dimensional tensor, but got a tensor with {indices_or_sections.dim()} dims")
        indices_or_sections = indices_or_sections.tolist()
    if isinstance(indices_or_sections, int):
        n = indices_or_sections
        if n <= 0:
            raise RuntimeError(f"number of sections must be larger than 0, got {n}")
        q, r = divmod(length, n)
        bounds, start = [], 0
        for i in range(n - 1):
            start += q + (1 if i < r else 0)
            bounds.append(start)
    else:
        bounds = [int(i) for i in indices_or_sections]
    out, start = [], 0
    for stop in bounds + [length]:
        lo = min(max(start if start >= 0 else start + length, 0), length)
        hi = min(max(stop if stop >= 0 else stop + length, 0), length)
        out.append(input.narrow(d, lo, max(hi - lo, 0)))
        start = stop
    return tuple(out)


def _split_at(name, input, sections, dim):
    if isinstance(sections, int):
        size = input.shape[dim]
        if sections == 0 or size % sections:
            raise RuntimeError(f"torch.{name} attempted to split along dimension {dim}, but the size of the "
                               f"dimension {size} is not divisible by the split_size {sections}!")
    return tensor_split(input, sections, dim)


def hsplit(input, indices_or_sections):
    if input.dim() < 1:
        raise RuntimeError(f"torch.hsplit requires a tensor with at least 1 dimension, but got a tensor with "
                           f"{input.dim()} dimensions!")
    return _split_at("hsplit", input, indices_or_sections, 1 if input.dim() > 1 else 0)


def vsplit(input, indices_or_sections):
    if input.dim() < 2:
        raise RuntimeError(f"torch.vsplit requires a tensor with at least 2 dimension, but got a tensor with "
                           f"{input.dim()} dimensions!")
    return _split_at("vsplit", input, indices_or_sections, 0)


def rot90(input, k=1, dims=(0, 1)):
    """Rotation by k * 90 degrees in the plane of dims, from the first towards the second."""
    dims = list(dims)
    if len(dims) != 2:
        raise RuntimeError(f"expected total rotation dims == 2, but got dims = {len(dims)}")
    if input.dim() < 2:
        raise RuntimeError(f"expected total dims >= 2, but got total dims = {input.dim()}")
    d0, d1 = dims[0] % input.dim(), dims[1] % input.dim()
    if d0 == d1:
        raise RuntimeError(f"expected rotation dims to be different, but got dim0 = {dims[0]} and dim1 = {dims[1]}")
    k %= 4
    if k == 1:
        return input.flip([d1]).transpose(d0, d1)
    if k == 2:
        return input.flip([d0, d1])
    if k == 3:
        return input.flip([d0]).transpose(d0, d1)
    return input.clone()


def take_along_dim(input, indices, dim=None):
    """gather with input and indices broadcast against each other in every dim but `dim`
    (dim None: over the flattened input)."""
    if indices.dtype != _C.int64:
        raise RuntimeError(f"torch.take_along_dim(): dtype of indices should be int64 but got {indices.dtype} "
                           "instead.")
    if dim is None:
        return input.reshape(-1).gather(0, indices.reshape(-1))
    if input.dim() != indices.dim():
        raise RuntimeError("torch.take_along_dim(): input and indices should have the same number of dimensions, "
                           f"but got {input.dim()} dimensions for input, and {indices.dim()} dimensions for indices")
    d = dim % input.dim()
    idx_shape = list(input.shape)
    idx_shape[d] = indices.shape[d]
    idx_shape = broadcast_shapes(idx_shape, indices.shape)
    in_shape = list(indices.shape)
    in_shape[d] = input.shape[d]
    in_shape = broadcast_shapes(in_shape, input.shape)
    return input.expand(list(in_shape)).gather(d, indices.expand(list(idx_shape)))


def trace(input):
    if input.dim() != 2:
        raise RuntimeError(f"trace: expected a matrix, but got tensor with dim {input.dim()}")
    return input.diagonal().sum()


def kron(input, other):
    """Kronecker product: block (i, j, ...) of the result is input[i, j, ...] * other."""
    nd = max(input.dim(), other.dim())
    a = input.reshape([1] * (nd - input.dim()) + list(input.shape))
    b = other.reshape([1] * (nd - other.dim()) + list(other.shape))
    a_view, b_view, out = [], [], []
    for sa, sb in zip(a.shape, b.shape):
        a_view += [sa, 1]
        b_view += [1, sb]
        out.append(sa * sb)
    return (a.reshape(a_view) * b.reshape(b_view)).reshape(out)


def _vector_distance(diff, p):
    """||diff||_p over the last dim, with a zero gradient where the distance is 0 (as torch's
    cdist backward) instead of sqrt's nan."""
    if p == 0:
        return (diff != 0).to(diff.dtype).sum(-1)
    a = diff.abs()
    if p == math.inf:
        return a.amax(-1)
    if p == 1:
        return a.sum(-1)
    s = (a * a).sum(-1) if p == 2 else (a ** p).sum(-1)
    pos = s > 0
    safe = _ops.where(pos, s, _ops.ones_like(s))
    root = safe.sqrt() if p == 2 else safe ** (1.0 / p)
    return _ops.where(pos, root, _ops.zeros_like(s))


def cdist(x1, x2, p=2.0, compute_mode="use_mm_for_euclid_dist_if_necessary"):
    """[..., P, M] x [..., R, M] -> [..., P, R] p-norm distances, computed directly (torch's mm
    path for large sizes rounds differently; this is the exact form)."""
    if x1.dim() < 2 or x2.dim() < 2:
        raise RuntimeError(f"cdist only supports at least 2D tensors, X1 got: {x1.dim()}D")
    if x1.shape[-1] != x2.shape[-1]:
        raise RuntimeError(f"X1 and X2 must have the same number of columns. X1: {x1.shape[-1]} X2: {x2.shape[-1]}")
    if not x1.dtype.is_floating_point:
        raise RuntimeError(f"cdist only supports floating-point dtypes, X1 got: {x1.dtype}")
    if p < 0:
        raise RuntimeError(f"cdist only supports non-negative p values, got: {p}")
    return _vector_distance(x1.unsqueeze(-2) - x2.unsqueeze(-3), p)


def _triangle_indices(lower, row, col, offset, dtype, device):
    rows, cols = (_np.tril_indices if lower else _np.triu_indices)(row, offset, col)
    data = _np.stack([rows, cols]).astype(_np.int64).reshape(2, -1)
    from ._creation import tensor
    return tensor(data, dtype=dtype, device=device)


def tril_indices(row, col, offset=0, *, dtype=None, device=None, layout=None):
    """The 2 x N (row, col) coordinates of the lower triangle, in row-major order."""
    return _triangle_indices(True, row, col, offset, dtype or _C.int64, device)


def triu_indices(row, col, offset=0, *, dtype=None, device=None, layout=None):
    return _triangle_indices(False, row, col, offset, dtype or _C.int64, device)


def cartesian_prod(*tensors):
    if len(tensors) == 1:
        return tensors[0]
    grids = meshgrid(*tensors, indexing="ij")
    return _ops.stack([g.reshape(-1) for g in grids], 1)


def diag_embed(input, offset=0, dim1=-2, dim2=-1):
    """Each last-dim vector of input placed on the offset-th diagonal of a new square plane in
    dims (dim1, dim2) of the result; zeros elsewhere."""
    nd = input.dim() + 1
    d1, d2 = dim1 % nd, dim2 % nd
    if d1 == d2:
        raise RuntimeError(f"diagonal dimensions cannot be identical {dim1}, {dim2}")
    n = input.shape[-1]
    m = n + abs(offset)
    rows = _ops.arange(m, device=input.device).unsqueeze(1)
    cols = _ops.arange(m, device=input.device).unsqueeze(0)
    on = (cols - rows) == offset
    along = (rows if offset >= 0 else cols).expand(m, m).clamp(max=max(n - 1, 0))
    out = _ops.where(on, input[..., along], input.new_zeros(()))  # [..., m, m]
    return out.movedim([nd - 2, nd - 1], [d1, d2])


def logit(input, eps=None):
    x = input if eps is None else input.clamp(eps, 1.0 - eps)
    return (x / (1 - x)).log()


def frac(input):
    _float_only("frac", input)
    return input - input.trunc()


def sgn(input):
    return input.sign()


def _signbit(t):
    if not t.dtype.is_floating_point:
        return t < 0
    return _ops.where(t == 0, (1.0 / t) < 0, t < 0)  # -0.0 has its sign bit set


def copysign(input, other):
    """|input| with the sign bit of other (-0.0 counts as negative), in a floating dtype."""
    if is_tensor(other):
        negative = _signbit(other)
        dtype = _C.result_type(input, other) if hasattr(_C, "result_type") else (input * other).dtype
    else:
        negative = math.copysign(1.0, float(other)) < 0
        dtype = (input * float(other)).dtype
    if not dtype.is_floating_point:
        dtype = _C.float32
    mag = input.to(dtype).abs()
    if is_tensor(negative):
        return _ops.where(negative, -mag, mag)
    return -mag if negative else mag


def float_power(input, exponent):
    """pow in float64 (both operands converted first)."""
    base = input.to(_C.float64) if is_tensor(input) else float(input)
    exp = exponent.to(_C.float64) if is_tensor(exponent) else float(exponent)
    if not is_tensor(base):
        return _ops.full_like(exp, base) ** exp
    return base ** exp


def nansum(input, dim=None, keepdim=False, *, dtype=None):
    x = input
    if input.dtype.is_floating_point:
        x = _ops.where(input.isnan(), input.new_zeros(()), input)
    if dim is None:
        return x.sum(dtype=dtype) if dtype is not None else x.sum()
    return x.sum(dim, keepdim, dtype=dtype) if dtype is not None else x.sum(dim, keepdim)


def nanmean(input, dim=None, keepdim=False, *, dtype=None):
    if not input.dtype.is_floating_point:
        raise RuntimeError(f"nanmean(): expected input to have floating point or complex dtype but got {input.dtype}")
    count = (~input.isnan()).sum() if dim is None else (~input.isnan()).sum(dim, keepdim)
    return nansum(input, dim, keepdim, dtype=dtype) / count


def isin(elements, test_elements, *, assume_unique=False, invert=False):
    """Whether each element of `elements` occurs in `test_elements` (either may be a scalar)."""
    if not is_tensor(elements) and not is_tensor(test_elements):
        raise TypeError("isin() received an invalid combination of arguments: expected at least one Tensor")
    if not is_tensor(test_elements):
        hit = elements == test_elements
    elif not is_tensor(elements):
        hit = (test_elements == elements).any().reshape(())
    else:
        flat = test_elements.reshape(-1)
        hit = (elements.unsqueeze(-1) == flat).any(-1) if flat.numel() else _ops.zeros_like(elements, dtype=_C.bool)
    return ~hit if invert else hit


_METHODS = (tile, ravel, tensor_split, hsplit, vsplit, rot90, take_along_dim, trace, kron, diag_embed, logit,
            frac, sgn, copysign, float_power, nansum, nanmean)


def _install_methods(tensor_class):
    for fn in _METHODS:
        setattr(tensor_class, fn.__name__, fn)
