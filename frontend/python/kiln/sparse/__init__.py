"""kiln.sparse: sparse COO tensors (torch.sparse's COO subset), on the CPU.

`kiln.sparse_coo_tensor(indices, values, size)` and `Tensor.to_sparse()` make one; it is a
kiln.Tensor with layout kiln.sparse_coo. kiln.mm / matmul / @ / addmm take one as either
matrix, kiln.sparse.mm / kiln.spmm multiply it by a dense matrix with the gradient torch's
sparse.mm gives (to the dense matrix, and to the sparse one masked to its pattern). Other ops
on a sparse tensor raise NotImplementedError naming the op; under kiln.compile a sparse tensor
runs its frame eagerly, as torch.compile does. docs/sparse.md tells how it is built.
"""
from .. import _C, _compiling
from .._layout import strided
from ._coo import SparseTensor, sparse_coo_tensor, to_sparse  # noqa: F401
from ._dispatch import handle as _handle, softmax as _softmax, sparse_sum, spmm as _spmm

__all__ = ["mm", "addmm", "sum", "softmax", "log_softmax", "SparseTensor"]

_C._set_sparse_tensor_class(SparseTensor, _handle)

# Making a sparse tensor in compiled code breaks the graph there (the graph that follows could
# not take it as an input either), as torch.compile's "Attempted to wrap sparse Tensor".
_WHY = "makes a sparse tensor (layout kiln.sparse_coo): kiln.compile does not support sparse tensors"
_compiling.not_traced(sparse_coo_tensor, "sparse_coo_tensor " + _WHY)
_compiling.not_traced(to_sparse, "Tensor.to_sparse " + _WHY)


def _install_methods(cls):
    """Tensor.layout (strided), to_sparse, to_sparse_coo and to_dense (of a dense tensor: itself)."""
    cls.layout = property(lambda self: strided)
    cls.to_sparse = to_sparse
    cls.to_sparse_coo = _to_sparse_coo
    cls.to_dense = _dense_to_dense


def _to_sparse_coo(self):
    return to_sparse(self)


_compiling.not_traced(_to_sparse_coo, "Tensor.to_sparse_coo " + _WHY)


def _dense_to_dense(self, dtype=None, *, masked_grad=None):
    return self if dtype is None else self.to(dtype)


def mm(mat1, mat2, reduce=None):
    """mat1 @ mat2 with a sparse mat1 (or two dense matrices). Gradients: mat2's dense, mat1's
    sparse with mat1's pattern (torch.sparse.mm)."""
    if reduce not in (None, "sum"):
        raise NotImplementedError(f"sparse.mm: reduce={reduce!r} (kiln has the default sum only)")
    if isinstance(mat1, SparseTensor):
        return _spmm(mat1, mat2, "sparse.mm")
    return _C._ops.mm(mat1, mat2)


def addmm(mat, mat1, mat2, beta=1.0, alpha=1.0):
    """beta * mat + alpha * (mat1 @ mat2), mat1 sparse (torch.sparse.addmm)."""
    product = mm(mat1, mat2)
    if alpha != 1:
        product = product * alpha
    return product + (mat if beta == 1 else mat * beta)


def sum(input, dim=None, dtype=None):
    """Sum over all dims (a 0-d dense tensor) or over `dim` (sparse while a sparse dim is left)."""
    if not isinstance(input, SparseTensor):
        return input.sum() if dim is None else input.sum(dim, dtype=dtype)
    return sparse_sum(input, dim, dtype=dtype)


def softmax(input, dim, dtype=None):
    """A softmax over each slice along `dim` of the specified entries only (the unspecified ones
    count as -inf), with input's coalesced pattern (torch.sparse.softmax)."""
    return _softmax(input, dim, dtype)


def log_softmax(input, dim, dtype=None):
    """log of kiln.sparse.softmax over the specified entries (computed as a log-softmax)."""
    return _softmax(input, dim, dtype, log=True)
