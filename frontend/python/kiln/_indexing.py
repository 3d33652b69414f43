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


def unique(input, sorted=True, return_inverse=False, return_counts=False, dim=None):
    """The distinct elements in ascending order; with return_inverse, where each element of input
    went; with return_counts, how often each occurs."""
    if dim is not None:
        raise NotImplementedError("kiln.unique: dim= is not supported; unique works on the "
                                  "flattened tensor (dim=None)")
    output, inverse, counts = _ops._unique2(input, sorted, return_inverse, return_counts)
    if return_inverse and return_counts:
        return output, inverse, counts
    if return_inverse:
        return output, inverse
    if return_counts:
        return output, counts
    return output


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
    nonzero_method.__name__ = "nonzero"
    unique_method.__name__ = "unique"
    tensor_class.nonzero = nonzero_method
    tensor_class.unique = unique_method
