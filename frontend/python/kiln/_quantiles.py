"""quantile, nanquantile and nanmedian (functions and Tensor methods), as PyTorch computes them:
sort along the dim (NaN last), the rank q * (n - 1) of each quantile (n: the slice's size, or its
count of non-NaN values for nanquantile), then the value at the rank's floor, interpolated towards
its ceiling (linear, midpoint) or rounded (lower, higher, nearest). Gradients come from sort,
gather and lerp."""
import collections

from . import _C

_ops = _C._ops
# nanmedian(dim)'s result, a named tuple as torch.return_types.nanmedian.
_nanmedian = collections.namedtuple("nanmedian", ["values", "indices"])
_nanmedian.__module__ = "kiln.return_types"
_MODES = ("linear", "lower", "higher", "midpoint", "nearest")


def _check(op, input, q, interpolation):
    if input.dtype not in (_C.float32, _C.float64):
        raise RuntimeError(f"{op}() input tensor must be either float or double dtype")
    if interpolation not in _MODES:
        raise RuntimeError(f"{op}() interpolation must be one of linear, lower, higher, midpoint or nearest. "
                           f"Got {interpolation}")
    if isinstance(q, _C.TensorBase):
        if q.dim() > 1:
            raise RuntimeError(f"{op}() q must be a scalar or 1D tensor")
        if q.dtype != input.dtype:
            raise RuntimeError(f"{op}() q tensor must be same dtype as the input tensor")
        # (A meta q, traced by kiln.compile, has no values to check: as with torch.compile, the
        # compiled quantile does not check its range.)
        if q.numel() and not q.is_meta and not bool(((q >= 0) & (q <= 1)).all()):
            raise RuntimeError(f"{op}() q values must be in the range [0, 1]")
        return q
    if not 0 <= q <= 1:
        raise RuntimeError(f"{op}() q must be in the range [0, 1] but got {q}")
    return _ops.full([], float(q), dtype=input.dtype, device=input.device)


def _quantile(op, input, q, dim, keepdim, interpolation, ignore_nan):
    q = _check(op, input, q, interpolation)
    scalar_q = q.dim() == 0
    if dim is None:
        values = input.reshape(-1)
    else:
        d = dim % max(input.dim(), 1)
        values = input.unsqueeze(-1).transpose(d, -1) if input.dim() else input.reshape(1, 1)
    if values.shape[-1] == 0:
        raise IndexError(f"{op}() input tensor must be non-empty")
    ordered = values.sort(dim=-1).values  # NaN sorts last
    qs = q.reshape(-1)
    nan = ordered.isnan()
    if ignore_nan:
        ranks = (qs * ((~nan).sum(-1, keepdim=True) - 1)).clamp(min=0)
    else:
        last = ordered.shape[-1] - 1
        ranks = _ops.where(nan.any(-1, keepdim=True), _ops.full([], float(last), dtype=q.dtype), qs * last)
    if interpolation == "lower":
        ranks = ranks.floor()
    elif interpolation == "higher":
        ranks = ranks.ceil()
    elif interpolation == "nearest":
        ranks = ranks.round()
    below = ranks.long()
    out = ordered.gather(-1, below)
    if interpolation in ("linear", "midpoint"):
        weight = ranks - below if interpolation == "linear" else _ops.full_like(ranks, 0.5)
        out = out.lerp(ordered.gather(-1, ranks.ceil().long()), weight)
    # [..., Q] -> [Q, ...]: the quantiles first, then the reduced shape (keepdim or not)
    out = out.movedim(-1, 0)
    if dim is None:
        out = out.reshape([qs.numel()] + ([1] * input.dim() if keepdim else []))
    elif not keepdim and input.dim():
        out = out.squeeze(d + 1)
    return out.squeeze(0) if scalar_q else out


def quantile(input, q, dim=None, keepdim=False, *, interpolation="linear"):
    return _quantile("quantile", input, q, dim, keepdim, interpolation, False)


def nanquantile(input, q, dim=None, keepdim=False, *, interpolation="linear"):
    return _quantile("nanquantile", input, q, dim, keepdim, interpolation, True)


def nanmedian(input, dim=None, keepdim=False):
    """The lower median of the non-NaN values (NaN where all are); with dim, (values, indices)."""
    if dim is None:
        return nanquantile(input.reshape(-1), 0.5, interpolation="lower") if input.numel() else \
            _ops.full([], float("nan"), dtype=input.dtype)
    if not input.dtype.is_floating_point:
        return input.median(dim, keepdim)
    ordered, order = input.sort(dim=dim, stable=True)
    count = (~ordered.isnan()).sum(dim, keepdim=True)
    at = ((count - 1) // 2).clamp(min=0)
    values, indices = ordered.gather(dim, at), order.gather(dim, at)
    if not keepdim:
        values, indices = values.squeeze(dim), indices.squeeze(dim)
    return _nanmedian(values, indices)


def _install_methods(tensor_class):
    for fn in (quantile, nanquantile, nanmedian):
        setattr(tensor_class, fn.__name__, fn)
