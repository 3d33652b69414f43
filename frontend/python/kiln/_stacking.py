"""torch's stacking, splitting and arrangement functions that are compositions of table ops:
hstack/vstack/dstack/column_stack, atleast_Nd, tensor_split and h/v/dsplit, fliplr/flipud,
rot90, block_diag, cartesian_prod, tril_indices/triu_indices. Differentiable and traceable
because their pieces are."""
from . import _C
from ._promotion import promote_types

__all__ = ["atleast_1d", "atleast_2d", "atleast_3d", "block_diag", "cartesian_prod", "column_stack", "dsplit",
           "dstack", "fliplr", "flipud", "hsplit", "hstack", "rot90", "row_stack", "tensor_split",
           "tril_indices", "triu_indices", "vsplit", "vstack"]


def _atleast(shape_of, tensors):
    single = len(tensors) == 1 and isinstance(tensors[0], _C.TensorBase)
    if len(tensors) == 1 and isinstance(tensors[0], (list, tuple)):
        tensors = tensors[0]
    out = tuple(t if (shape := shape_of(t)) is None else t.reshape(shape) for t in tensors)
    return out[0] if single else out


def atleast_1d(*tensors):
    return _atleast(lambda t: [1] if t.dim() == 0 else None, tensors)


def atleast_2d(*tensors):
    return _atleast(lambda t: [1, 1] if t.dim() == 0 else [1, t.shape[0]] if t.dim() == 1 else None, tensors)


def atleast_3d(*tensors):
    def shape(t):
        if t.dim() == 0:
            return [1, 1, 1]
        if t.dim() == 1:
            return [1, t.shape[0], 1]
        return [*t.shape, 1] if t.dim() == 2 else None
    return _atleast(shape, tensors)


def _as_tuple(tensors, what):
    if isinstance(tensors, _C.TensorBase):
        raise TypeError(f"{what}(): argument 'tensors' must be tuple of Tensors, not Tensor")
    tensors = tuple(tensors)
    if not tensors:
        raise RuntimeError(f"{what} expects a non-empty TensorList")
    return tensors


def hstack(tensors):
    parts = atleast_1d(_as_tuple(tensors, "hstack"))
    return _C._ops.cat(list(parts), 0 if all(t.dim() == 1 for t in parts) else 1)


def vstack(tensors):
    return _C._ops.cat(list(atleast_2d(_as_tuple(tensors, "vstack"))), 0)


row_stack = vstack


def dstack(tensors):
    return _C._ops.cat(list(atleast_3d(_as_tuple(tensors, "dstack"))), 2)


def column_stack(tensors):
    parts = [t.reshape([t.numel(), 1]) if t.dim() <= 1 else t for t in _as_tuple(tensors, "column_stack")]
    return _C._ops.cat(parts, 1)


def tensor_split(input, indices_or_sections, dim=0):
    """Views of input split along dim: into n nearly equal parts (the first size % n one longer)
    or at the given indices."""
    sections = indices_or_sections
    if isinstance(sections, _C.TensorBase):
        if sections.dtype.is_floating_point or sections.dim() > 1:
            raise RuntimeError("tensor_split expected tensor_indices_or_sections to be a zero-dimensional or "
                               "one-dimensional tensor, but got a tensor with "
                               f"{sections.dim()} dims" if sections.dim() > 1 else
                               "tensor_split expected tensor_indices_or_sections to have dtype of long")
        sections = sections.item() if sections.dim() == 0 else sections.tolist()
    size = input.shape[dim]
    if isinstance(sections, int):
        if sections <= 0:
            raise RuntimeError(f"number of sections must be larger than 0, got {sections}")
        base, extra = divmod(size, sections)
        bounds, start = [], 0
        for i in range(sections):
            end = start + base + (1 if i < extra else 0)
            bounds.append((start, end))
            start = end
    else:
        points = [0] + [min(max(p if p >= 0 else p + size, 0), size) for p in sections] + [size]
        bounds = [(a, max(a, b)) for a, b in zip(points, points[1:])]
    return tuple(input.narrow(dim, a, b - a) for a, b in bounds)


def _split_along(input, sections, dim, name):
    if isinstance(sections, int):
        size = input.shape[dim]
        if sections == 0 or size % sections:
            raise RuntimeError(f"torch.{name} attempted to split along dimension {dim}, but the size of the "
                               f"dimension {size} is not divisible by the split_size {sections}!")
    return tensor_split(input, sections, dim)


def hsplit(input, indices_or_sections):
    if input.dim() < 1:
        raise RuntimeError("torch.hsplit requires a tensor with at least 1 dimension, but got a tensor with 0 "
                           "dimensions!")
    return _split_along(input, indices_or_sections, 1 if input.dim() > 1 else 0, "hsplit")


def vsplit(input, indices_or_sections):
    if input.dim() < 2:
        raise RuntimeError(f"torch.vsplit requires a tensor with at least 2 dimension, but got a tensor with "
                           f"{input.dim()} dimensions!")
    return _split_along(input, indices_or_sections, 0, "vsplit")


def dsplit(input, indices_or_sections):
    if input.dim() < 3:
        raise RuntimeError(f"torch.dsplit requires a tensor with at least 3 dimension, but got a tensor with "
                           f"{input.dim()} dimensions!")
    return _split_along(input, indices_or_sections, 2, "dsplit")


def fliplr(input):
    if input.dim() < 2:
        raise RuntimeError("Input must be >= 2-d.")
    return input.flip([1])


def flipud(input):
    if input.dim() < 1:
        raise RuntimeError("Input must be >= 1-d.")
    return input.flip([0])


def rot90(input, k=1, dims=(0, 1)):
    """Rotates by 90 degrees k times in the plane of dims, from the first towards the second."""
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


def block_diag(*tensors):
    """The tensors (0-d, 1-d as a row, or 2-d) along the diagonal of one matrix of zeros."""
    parts = []
    for i, t in enumerate(tensors):
        if t.dim() > 2:
            raise RuntimeError(f"torch.block_diag: Input tensors must have 2 or fewer dimensions. Input {i} has "
                               f"{t.dim()} dimensions")
        parts.append(t.reshape([1, 1]) if t.dim() == 0 else t.reshape([1, t.shape[0]]) if t.dim() == 1 else t)
    if not parts:
        return _C._ops.empty([1, 0])
    dtype = parts[0].dtype
    for t in parts[1:]:
        dtype = promote_types(dtype, t.dtype)
    width = sum(t.shape[1] for t in parts)
    rows, left = [], 0
    for t in parts:
        r, c = t.shape
        pieces = [_C._ops.zeros([r, left], dtype=dtype, device=t.device), t.to(dtype),
                  _C._ops.zeros([r, width - left - c], dtype=dtype, device=t.device)]
        rows.append(_C._ops.cat(pieces, 1))
        left += c
    return _C._ops.cat(rows, 0)


def cartesian_prod(*tensors):
    """Every combination of one element from each 1-D tensor, in row-major order: [N, len]."""
    for t in tensors:
        if t.dim() != 1:
            raise RuntimeError(f"Expect a 1D vector, but got shape {list(t.shape)}")
    if len(tensors) == 1:
        return tensors[0]
    from ._composites import meshgrid
    grids = meshgrid(*tensors, indexing="ij")
    return _C._ops.stack([g.reshape([-1]) for g in grids], 1)


def combinations(input, r=2, with_replacement=False):
    """The length-r combinations of a 1-D tensor's elements, in lexicographic order of positions
    (itertools.combinations / combinations_with_replacement): [N, r]; [0] for r == 0."""
    if input.dim() != 1:
        raise RuntimeError(f"Expect a 1D vector, but got shape {list(input.shape)}")
    if r < 0:
        raise RuntimeError(f"Expect a non-negative number, but got {r}")
    if r == 0:
        return input.new_empty([0])
    if r == 1:
        return input.unsqueeze(1)
    from ._composites import meshgrid
    n = input.shape[0]
    grids = meshgrid(*([_C._ops.arange(n, device=input.device)] * r), indexing="ij")
    keep = _C._ops.ones([n] * r, dtype=_C.bool, device=input.device)
    for a, b in zip(grids, grids[1:]):
        keep = keep & ((a <= b) if with_replacement else (a < b))
    positions = _C._ops.stack([g[keep] for g in grids], 1)
    return input[positions]


def _triangle_indices(row, col, span, dtype, device):
    """[2, N] (row, column) indices, row by row; span(i) is row i's column range. Built from
    full/arange per row, not from Python data: inside kiln.compile a tensor made from Python data
    in library code cannot be part of a graph (the whole frame ran eagerly)."""
    rows, cols = [], []
    for i in range(row):
        lo, hi = span(i)
        if hi > lo:
            rows.append(_C._ops.full([hi - lo], i, dtype=dtype, device=device))
            cols.append(_C._ops.arange(lo, hi, dtype=dtype, device=device))
    if not rows:
        return _C._ops.empty([2, 0], dtype=dtype, device=device)
    return _C._ops.stack([_C._ops.cat(rows), _C._ops.cat(cols)])


def tril_indices(row, col, offset=0, *, dtype=None, device=None, layout=None):
    """The (row, column) indices of the lower triangle (j <= i + offset), row by row: [2, N]."""
    return _triangle_indices(row, col, lambda i: (0, min(col, i + offset + 1)), dtype or _C.int64, device)


def triu_indices(row, col, offset=0, *, dtype=None, device=None, layout=None):
    """The (row, column) indices of the upper triangle (j >= i + offset), row by row: [2, N]."""
    return _triangle_indices(row, col, lambda i: (max(0, i + offset), col), dtype or _C.int64, device)


def _install_methods(tensor_class):
    for fn in (tensor_split, hsplit, vsplit, dsplit, fliplr, flipud, rot90):
        setattr(tensor_class, fn.__name__, fn)
