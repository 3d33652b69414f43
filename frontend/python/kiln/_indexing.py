"""The indexing functions whose Python signatures the op table cannot express: nonzero's
as_tuple=, einsum's operands as varargs, unique's optional outputs, bucketize (searchsorted
with its arguments swapped), Tensor.unfold (a view). Each calls table ops."""
import collections

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


def _torch_type_name(dtype):
    """The C++ scalar type name torch's dispatch errors use (Long, Int, Bool, ...)."""
    name = str(dtype).split(".")[-1]
    return {"int64": "Long", "int32": "Int", "int16": "Short", "int8": "Char", "uint8": "Byte", "bool": "Bool",
            "float16": "Half", "bfloat16": "BFloat16", "float32": "Float", "float64": "Double"}.get(name, name)


def histc(input, bins=100, min=0, max=0):
    """Counts of input's elements in `bins` equal-width bins over [min, max] (the data's range when
    both are 0), in input's dtype; elements outside are ignored, max falls in the last bin. The
    bin of x is (x - min) * bins / (max - min) rounded down, computed in input's dtype as
    torch's kernel does (so elements on a bin edge land where torch puts them)."""
    if not input.dtype.is_floating_point:
        raise RuntimeError(f"\"histogram_cpu\" not implemented for '{_torch_type_name(input.dtype)}'")
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
    lo_t = _ops.full([], lo, dtype=input.dtype, device=input.device)
    hi_t = _ops.full([], hi, dtype=input.dtype, device=input.device)
    inside = (x >= lo_t) & (x <= hi_t)
    position = ((x - lo_t) * bins / (hi_t - lo_t)).long().clamp(max=bins - 1)
    slot = _ops.where(inside, position, _ops.full([], bins, dtype=_C.int64, device=input.device))
    counts = _ops.zeros([bins + 1], dtype=input.dtype, device=input.device)
    return counts.scatter_add(0, slot, _ops.ones_like(x))[:bins]


# histogram's result, a named tuple (hist, bin_edges) as torch.return_types.histogram.
_histogram_result = collections.namedtuple("histogram", ["hist", "bin_edges"])
_histogram_result.__module__ = "kiln.return_types"


def _dtype_name(dtype):
    return {"float32": "float", "float64": "double", "float16": "c10::Half", "bfloat16": "c10::BFloat16"}.get(
        str(dtype).split(".")[-1], str(dtype).split(".")[-1])


def histogram(input, bins, *, range=None, weight=None, density=False):
    """torch.histogram: (hist, bin_edges). `bins` an int (that many equal-width bins over `range`,
    or over the data's min and max) or a 1-D tensor of edges. x falls in the bin [e_i, e_i+1) of
    the last edge e_i <= x, the rightmost bin including its right edge; elements outside the
    edges are not counted. `weight` (input's shape) adds that weight instead of 1; `density`
    divides by the total and the bin widths."""
    if not input.dtype.is_floating_point:
        raise RuntimeError(f"\"histogramdd\" not implemented for '{_torch_type_name(input.dtype)}'")
    if weight is not None and list(weight.shape) != list(input.shape):
        raise RuntimeError("torch.histogramdd: if weight tensor is provided it should have the same shape as the input "
                           f"tensor excluding its innermost dimension, but got input with shape {list(input.shape) + [1]} "
                           f"and weight with shape {list(weight.shape)}")
    if isinstance(bins, _C.TensorBase):
        if bins.dim() != 1:
            raise RuntimeError("torch.histogramdd: bins tensor should have one dimension, but got "
                               f"{bins.dim()} dimensions in the bins tensor for dimension 0")
        if bins.dtype != input.dtype:
            raise RuntimeError("torch.histogramdd: input tensor and bins tensors should have the same dtype, but got "
                               f"input with dtype {_dtype_name(input.dtype)} and bins for dimension 0 with dtype "
                               f"{_dtype_name(bins.dtype)}")
        if bins.numel() == 0:
            raise RuntimeError("torch.histogramdd: bins tensor should have at least 1 element, but got 0 elements in "
                               "the bins tensor for dimension 0")
        edges = bins
    else:
        if int(bins) <= 0:
            raise RuntimeError(f"torch.histogram(): bins must be > 0, but got {bins} for dimension 0")
        if range is not None:
            lo, hi = float(range[0]), float(range[1])
        elif input.numel():
            lo, hi = input.min().item(), input.max().item()
        else:
            lo, hi = 0.0, 1.0
        if lo > hi:
            raise RuntimeError(f"torch.histogramdd: min should not exceed max, but got min {lo:g} max {hi:g} "
                               "for dimension 0")
        if not (abs(lo) < float("inf") and abs(hi) < float("inf")):
            raise RuntimeError(f"torch.histogramdd: dimension 0's range [{lo:g}, {hi:g}] is not finite")
        if lo == hi:  # numpy's rule: a unit-wide range around the value
            lo, hi = lo - 0.5, hi + 0.5
        edges = _ops.linspace(lo, hi, int(bins) + 1, dtype=input.dtype, device=input.device)
    n = edges.shape[0] - 1
    x = input.reshape(-1)
    if n == 0:
        hist = _ops.zeros([0], dtype=input.dtype, device=input.device)
        return _histogram_result(hist, edges)
    inside = (x >= edges[0]) & (x <= edges[-1])
    position = (_ops.searchsorted(edges, x, right=True) - 1).clamp(0, n - 1)
    slot = _ops.where(inside, position, _ops.full([], n, dtype=_C.int64, device=input.device))
    values = _ops.ones_like(x) if weight is None else weight.reshape(-1).to(input.dtype)
    hist = _ops.zeros([n + 1], dtype=input.dtype, device=input.device).scatter_add(0, slot, values)[:n]
    if density:
        hist = hist / (hist.sum() * (edges[1:] - edges[:-1]))
    return _histogram_result(hist, edges)


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
    tensor_class.histogram = histogram
    nonzero_method.__name__ = "nonzero"
    unique_method.__name__ = "unique"
    tensor_class.nonzero = nonzero_method
    tensor_class.unique = unique_method
