"""torch functions model code calls that are compositions of table ops and not in _stacking /
_math_composites: tile, ravel, diag_embed, sgn (with Tensor methods). torch's shapes, dtypes
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


def _install_methods(tensor_class):
    for fn in (tile, ravel, diag_embed, sgn):
        setattr(tensor_class, fn.__name__, fn)
