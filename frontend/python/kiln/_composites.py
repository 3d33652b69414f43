"""torch functions that real model code calls and that are compositions of table ops (no
kernel of their own): type predicates, broadcasting helpers, diagonal views and meshgrid."""
from . import _C
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


def _install_methods(tensor_class):
    tensor_class.diagonal = diagonal
    tensor_class.diag = diag
    tensor_class.broadcast_to = broadcast_to
    tensor_class.is_floating_point = is_floating_point
