"""torch functions model code calls that are compositions of table ops and not in _stacking /
_math_composites: tile, ravel, diag_embed, sgn, index_reduce, dist, vander, frexp, isreal, narrow_copy,
unsafe_split / unsafe_chunk, sum_to_size, renorm, apply_ / map_ (with Tensor methods). torch's shapes, dtypes
and errors; gradients come from the ops they are made of."""
import collections

from . import _C

_ops = _C._ops


def tile(input, *dims):
    """repeat() after padding dims (a sequence, or ints as Tensor.tile takes them) with leading 1s
    to input's rank."""
    if len(dims) == 1 and not isinstance(dims[0], int):
        dims = dims[0]
    dims = [int(d) for d in dims]
    return input.repeat(*([1] * (input.dim() - len(dims)) + dims))


def ravel(input):
    return input.reshape(-1)


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
    # v gathered along the rows (columns below the main diagonal) where the diagonal runs
    along = (rows if offset >= 0 else cols).expand(m, m).clamp(max=max(n - 1, 0))
    out = _ops.where(on, input[..., along], input.new_zeros(()))  # [..., m, m]
    return out.movedim([nd - 2, nd - 1], [d1, d2])


def sgn(input):
    return input.sign()  # real dtypes only: kiln has no complex tensors


_INDEX_REDUCTIONS = ("prod", "mean", "amax", "amin")


def _index_reduce_args(op, input, dim, index, source, reduce):
    """index_reduce as a scatter_reduce: the 1-D index spread along `dim` over source's shape."""
    if reduce not in _INDEX_REDUCTIONS:
        raise RuntimeError(f"{op}(): Expected reduce to be one of prod, mean, amax or amin but got {reduce}.")
    if index.dtype not in (_C.int64, _C.int32):
        raise RuntimeError(f"{op}(): Expected dtype int32/int64 for index but got: {index.dtype}")
    if index.dim() > 1:
        raise IndexError(f"{op}(): Index is supposed to be a vector, but got dim: {index.dim()} with type: "
                         f"{index.dtype} and size: {list(index.shape)}")
    if source.dtype != input.dtype:
        raise RuntimeError(f"{op}(): self ({input.dtype}) and source ({source.dtype}) must have the same scalar type")
    nd = max(input.dim(), 1)
    if not -nd <= dim < nd:
        raise IndexError(f"Dimension out of range (expected to be in range of [{-nd}, {nd - 1}], but got {dim})")
    d = dim % nd
    n = index.numel()
    src_len = source.shape[d] if source.dim() else 1
    if src_len != n:
        raise IndexError(f"{op}(): Number of indices ({n}) should be equal to source.size(dim) ({src_len})")
    if source.dim() != input.dim() or any(source.shape[i] != input.shape[i] for i in range(input.dim()) if i != d):
        raise RuntimeError(f"{op}(): Source/destination tensor must have same slice shapes. Destination slice "
                           f"shape: {list(input.shape)} at dimension {d} and source slice shape: "
                           f"{list(source.shape)} at dimension {d}.")
    view = [1] * max(source.dim(), 1)
    view[d] = n
    spread = index.long().reshape(view).expand(list(source.shape)) if source.dim() else index.long().reshape([])
    return d, spread


def index_reduce(input, dim, index, source, reduce, *, include_self=True):
    """Reduces the slices of `source` into input's slices `index[i]` along `dim` with `reduce`
    (prod, mean, amax, amin); include_self=False leaves input's own values out of the indexed
    slices. torch's semantics, as a scatter_reduce (its gradients too)."""
    d, spread = _index_reduce_args("index_reduce", input, dim, index, source, reduce)
    return input.scatter_reduce(d, spread, source, reduce, include_self=include_self)


def index_reduce_(input, dim, index, source, reduce, *, include_self=True):
    d, spread = _index_reduce_args("index_reduce_", input, dim, index, source, reduce)
    return input.scatter_reduce_(d, spread, source, reduce, include_self=include_self)


def dist(input, other, p=2):
    """The p-norm of input - other (broadcast), over all elements: norm(input - other, p)."""
    return (input - other).norm(p)


def vander(x, N=None, increasing=False):
    """The Vandermonde matrix of a 1-d x: columns x^(N-1) ... x^0 (or ascending), made as torch
    makes it (a cumulative product of x, so the powers round as torch's); integer and bool x
    give int64."""
    if x.dim() != 1:
        raise RuntimeError("x must be a one-dimensional tensor.")
    n = x.shape[0] if N is None else int(N)
    if n < 0:
        raise RuntimeError("N must be non-negative.")
    dtype = x.dtype if x.dtype.is_floating_point or x.dtype.is_complex else _C.int64
    columns = [_ops.ones((x.shape[0], min(n, 1)), dtype=dtype, device=x.device)]
    if n > 1:
        columns.append(x.to(dtype).unsqueeze(1).expand(x.shape[0], n - 1).cumprod(1))
    out = _ops.cat(columns, 1)
    return out if increasing else out.flip(1)


# frexp's result, a named tuple (mantissa, exponent) as torch.return_types.frexp.
_frexp = collections.namedtuple("frexp", ["mantissa", "exponent"])
_frexp.__module__ = "kiln.return_types"


def frexp(input):
    """(mantissa, exponent): input = mantissa * 2**exponent with 0.5 <= |mantissa| < 1 (int32
    exponent; zeros, infinities and nans give themselves and 0), as C's frexp. The exponent comes
    from log2 in float64, corrected by one where that rounded across a power of two; the scaling
    by a power of two is exact."""
    if not input.dtype.is_floating_point:
        raise RuntimeError("torch.frexp() only supports floating-point dtypes")
    x = input.double()
    regular = (x != 0) & x.isfinite()
    a = _ops.where(regular, x.abs(), _ops.ones_like(x))
    e = a.log2().floor() + 1
    m = a * (-e).exp2()
    e = _ops.where(m >= 1, e + 1, _ops.where(m < 0.5, e - 1, e))
    mantissa = _ops.where(regular, x * (-e).exp2(), x)
    exponent = _ops.where(regular, e, _ops.zeros_like(e)).to(_C.int32)
    return _frexp(mantissa.to(input.dtype), exponent)


def narrow_copy(input, dim, start, length):
    """narrow(), copied into a new contiguous tensor."""
    return input.narrow(dim, start, length).contiguous().clone()


def sum_to_size(input, *size):
    """input summed over the dims where `size` (which must expand to input's shape) has 1 or
    nothing: the reduction that undoes a broadcast."""
    if len(size) == 1 and not isinstance(size[0], int):
        size = tuple(size[0])
    size, shape = [int(s) for s in size], list(input.shape)
    lead = len(shape) - len(size)
    if lead < 0 or any(s != 1 and s != shape[lead + i] for i, s in enumerate(size)):
        raise RuntimeError(f"size {{{size}}} is not expandable to size {{{shape}}}.")
    dims = list(range(lead)) + [lead + i for i, s in enumerate(size) if s == 1 and shape[lead + i] != 1]
    return (input.sum(dims, keepdim=True) if dims else input).reshape(size)


def renorm(input, p, dim, maxnorm):
    """Each slice along `dim` whose p-norm exceeds maxnorm scaled to maxnorm (by
    maxnorm / (norm + 1e-7), as torch), the others left as they are."""
    if p <= 0:
        raise RuntimeError("renorm: non-positive-norm not supported")
    d = dim + input.dim() if dim < 0 else dim
    if not 0 <= d < max(input.dim(), 1):
        raise IndexError(f"Dimension out of range (expected to be in range of [{-input.dim()}, {input.dim() - 1}], "
                         f"but got {dim})")
    norm = input.norm(p, [i for i in range(input.dim()) if i != d], keepdim=True)
    factor = _ops.where(norm > maxnorm, maxnorm / (norm + 1e-7), _ops.ones_like(norm))
    return input * factor


def renorm_(input, p, dim, maxnorm):
    return input.copy_(renorm(input, p, dim, maxnorm))


def _tensor(values, dtype):
    from . import tensor
    return tensor(values, dtype=dtype)


def apply_(input, callable):
    """Replaces each element by callable(element) (Python numbers; CPU tensors only, as torch)."""
    if input.device.type != "cpu":
        raise TypeError("apply_ is only implemented on CPU tensors")
    values = [callable(v) for v in input.reshape(-1).tolist()]
    return input.copy_(_tensor(values, dtype=input.dtype).reshape(input.shape))


def map_(input, tensor, callable):
    """Replaces each element x of input by callable(x, y), y the matching element of `tensor`
    (broadcast to input's shape; CPU tensors only, as torch)."""
    if input.device.type != "cpu":
        raise TypeError("map_ is only implemented on CPU tensors")
    ys = tensor.expand(input.shape).reshape(-1).tolist()
    values = [callable(x, y) for x, y in zip(input.reshape(-1).tolist(), ys)]
    return input.copy_(_tensor(values, dtype=input.dtype).reshape(input.shape))


def isreal(input):
    """True where an element has no imaginary part (everywhere for a real dtype)."""
    if input.dtype.is_complex:
        return input.imag == 0
    return _ops.ones(input.shape, dtype=_C.bool, device=input.device)


def unsafe_split(input, split_size, dim=0):
    return input.split(split_size, dim)


def unsafe_chunk(input, chunks, dim=0):
    return input.chunk(chunks, dim)


def _install_methods(tensor_class):
    for fn in (tile, ravel, diag_embed, sgn, index_reduce, index_reduce_, dist, frexp, isreal,
               narrow_copy, unsafe_split, unsafe_chunk, sum_to_size, renorm, renorm_, apply_, map_):
        setattr(tensor_class, fn.__name__, fn)
