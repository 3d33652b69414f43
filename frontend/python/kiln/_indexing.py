"""The indexing functions whose Python signatures the op table cannot express: nonzero's
as_tuple=, einsum's operands as varargs, unique's optional outputs, bucketize (searchsorted
with its arguments swapped), Tensor.unfold (a view). Each calls table ops."""
from . import _C

_ops = _C._ops


def nonzero(input, *, as_tuple=False):
    """The coordinates of the nonzero elements: an [n, ndim] int64 tensor, or one 1-D tensor
    per dim with as_tuple=True (what where(condition) returns)."""
    if as_tuple:
        return tuple(_ops.where(input))
    return _ops.nonzero(input)


def einsum(*args):
    """einsum(equation, *operands), the operands also accepted as one list or tuple."""
    if len(args) < 1 or not isinstance(args[0], str):
        raise TypeError("einsum(): must specify the equation string and at least one operand, "
                        "or at least one operand and its subscripts list")
    equation, operands = args[0], args[1:]
    if len(operands) == 1 and isinstance(operands[0], (list, tuple)):
        operands = operands[0]
    return _ops.einsum(equation, list(operands))


def _unique_result(output, inverse, counts, return_inverse, return_counts):
    if return_inverse and return_counts:
        return output, inverse, counts
    if return_inverse:
        return output, inverse
    if return_counts:
        return output, counts
    return output


def unique(input, sorted=True, return_inverse=False, return_counts=False, dim=None):
    """The distinct elements in ascending order (with dim: the distinct slices along dim, in
    lexicographic order); with return_inverse, where each element (slice) of input went; with
    return_counts, how often each occurs."""
    if dim is not None:
        return _unique_dim(input, dim, return_inverse, return_counts)
    output, inverse, counts = _ops._unique2(input, sorted, return_inverse, return_counts)
    return _unique_result(output, inverse, counts, return_inverse, return_counts)


def _slices(input, dim):
    """input's slices along dim as the rows of a [n, rest] matrix, and dim wrapped."""
    if input.dim() == 0:
        raise IndexError("unique(): dim is given for a 0-d tensor")
    d = dim % input.dim()
    moved = input.movedim(d, 0)
    return moved.reshape(moved.shape[0], -1), d


def _unique_dim(input, dim, return_inverse, return_counts):
    """The rows sorted lexicographically (stable sorts from the last column to the first), each
    run of equal rows kept once."""
    rows, d = _slices(input, dim)
    n = rows.shape[0]
    order = _ops.arange(n, device=input.device)
    for c in range(rows.shape[1] - 1, -1, -1):
        order = order[rows[order, c].argsort(stable=True)]
    ordered = rows[order]
    starts = _ops.ones([n], dtype=_C.bool, device=input.device)
    if n > 1:
        starts[1:] = (ordered[1:] != ordered[:-1]).any(dim=1) if rows.shape[1] else False
    group = starts.long().cumsum(0) - 1
    shape = list(input.movedim(d, 0).shape)
    output = ordered[starts].reshape([-1] + shape[1:]).movedim(0, d)
    inverse = _ops.empty_like(group).index_copy(0, order, group) if return_inverse else None
    counts = group.bincount(minlength=0) if return_counts else None
    return _unique_result(output, inverse, counts, return_inverse, return_counts)


def unique_consecutive(input, return_inverse=False, return_counts=False, dim=None):
    """Each run of equal consecutive elements (slices along dim) kept once, in input order."""
    if dim is None:
        rows, d = input.reshape(-1, 1), None
    else:
        rows, d = _slices(input, dim)
    n = rows.shape[0]
    starts = _ops.ones([n], dtype=_C.bool, device=input.device)
    if n > 1:
        starts[1:] = (rows[1:] != rows[:-1]).any(dim=1) if rows.shape[1] else False
    group = starts.long().cumsum(0) - 1
    if d is None:
        output = input.reshape(-1)[starts]
        inverse = group.reshape(input.shape)
    else:
        output = input.index_select(d, starts.nonzero().reshape(-1))
        inverse = group
    counts = group.bincount(minlength=0) if return_counts else None
    return _unique_result(output, inverse if return_inverse else None, counts, return_inverse, return_counts)


def histc(input, bins=100, min=0, max=0):
    """Counts of input's elements in `bins` equal-width bins over [min, max] (the data's range when
    both are 0), in input's dtype; elements outside are ignored, max falls in the last bin."""
    if not input.dtype.is_floating_point:
        raise RuntimeError(f"\"histogram_cpu\" not implemented for '{str(input.dtype).split('.')[-1].capitalize()}'")
    if bins <= 0:
        raise RuntimeError("torch.histc: bins must be > 0, but got {} for dimension 0".format(bins))
    lo, hi = float(min), float(max)
    if lo == hi and input.numel():
        lo, hi = input.min().item(), input.max().item()
    if lo == hi:
        lo, hi = lo - 1, hi + 1
    if lo > hi:
        raise RuntimeError(f"torch.histc: max must be larger than min")
    x = input.reshape(-1)
    inside = (x >= lo) & (x <= hi)
    position = ((x - lo) / (hi - lo) * bins).long().clamp(max=bins - 1)
    slot = _ops.where(inside, position, _ops.full([], bins, dtype=_C.int64, device=input.device))
    counts = _ops.zeros([bins + 1], dtype=input.dtype, device=input.device)
    return counts.scatter_add(0, slot, _ops.ones_like(x))[:bins]


def bucketize(input, boundaries, *, out_int32=False, right=False):
    """For each element of input, the index of the bucket of the sorted 1-D `boundaries` it falls
    in: searchsorted(boundaries, input) (right=True: boundaries[i-1] <= x < boundaries[i])."""
    if not isinstance(boundaries, _C.TensorBase) or boundaries.dim() != 1:
        got = f"dim({boundaries.dim()})" if isinstance(boundaries, _C.TensorBase) else type(boundaries).__name__
        raise RuntimeError(f"bucketize(): boundaries tensor must be 1 dimension, but got {got}")
    return _ops.searchsorted(boundaries, input, out_int32=out_int32, right=right)


def unfold(self, dimension, size, step):
    """Tensor.unfold: the `size`-long windows of `dimension`, `step` apart, along a new last
    dimension: a view of self (as_strided over self's strides), as PyTorch's."""
    nd = max(self.dim(), 1)
    if not -nd <= dimension < nd:
        raise IndexError(f"Dimension out of range (expected to be in range of [{-nd}, {nd - 1}], "
                         f"but got {dimension})")
    d = dimension % nd
    n = self.shape[d] if self.dim() else 1
    if size > n:
        raise RuntimeError(f"maximum size for tensor at dimension {d} is {n} but size is {size}")
    if size < 0:
        raise RuntimeError(f"size is {size} but must be >= 0")
    if step <= 0:
        raise RuntimeError(f"step is {step} but must be > 0")
    sizes, strides = list(self.shape), list(self.stride())
    along = strides[d] if self.dim() else 1
    if self.dim():
        sizes[d] = (n - size) // step + 1
        strides[d] = along * step
    return self.as_strided(sizes + [size], strides + [along], self.storage_offset())


def _install_methods(tensor_class):
    def nonzero_method(self, *, as_tuple=False):
        return nonzero(self, as_tuple=as_tuple)

    def unique_method(self, sorted=True, return_inverse=False, return_counts=False, dim=None):
        return unique(self, sorted, return_inverse, return_counts, dim)

    tensor_class.unfold = unfold
    tensor_class.unique_consecutive = unique_consecutive
    tensor_class.histc = histc
    nonzero_method.__name__ = "nonzero"
    unique_method.__name__ = "unique"
    tensor_class.nonzero = nonzero_method
    tensor_class.unique = unique_method
