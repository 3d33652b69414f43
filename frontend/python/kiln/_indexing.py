"""The indexing functions whose Python signatures the op table cannot express: nonzero's
as_tuple=, einsum's operands as varargs, unique's optional outputs. Each calls table ops."""
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


def _install_methods(tensor_class):
    def nonzero_method(self, *, as_tuple=False):
        return nonzero(self, as_tuple=as_tuple)

    def unique_method(self, sorted=True, return_inverse=False, return_counts=False, dim=None):
        return unique(self, sorted, return_inverse, return_counts, dim)

    nonzero_method.__name__ = "nonzero"
    unique_method.__name__ = "unique"
    tensor_class.nonzero = nonzero_method
    tensor_class.unique = unique_method
