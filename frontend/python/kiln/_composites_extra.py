"""torch functions model code calls that are compositions of table ops and not in _stacking /
_math_composites: tile, ravel, diag_embed, sgn, index_reduce (with Tensor methods). torch's shapes, dtypes
and errors; gradients come from the ops they are made of."""
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


def _install_methods(tensor_class):
    for fn in (tile, ravel, diag_embed, sgn, index_reduce, index_reduce_):
        setattr(tensor_class, fn.__name__, fn)
