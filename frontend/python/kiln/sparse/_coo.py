"""Sparse COO tensors: kiln.Tensor objects whose data is an (indices, values) pair.

A SparseTensor is a kiln.Tensor (isinstance holds, nn.Module takes it as a buffer) whose C++
tensor is a meta placeholder of the full shape and dtype: shape, size(), dim(), numel() and dtype
read it. No C++ kernel ever computes on the placeholder: an op called with a sparse tensor goes
to the Python handler in kiln/sparse/_dispatch.py (frontend/binding/OpFunction.cpp), indexing
one raises, and kiln.compile breaks the graph at one (frontend/capture/Tracer.cpp). The data is
two dense tensors, `indices` (int64, sparse_dim x nnz) and `values` (nnz x dense sizes), and
every sparse op is written in dense ops on them, so autograd needs nothing of its own: a
gradient reaches the values (and through them whatever they were computed from).
"""
from .. import _C
from .._layout import sparse_coo
from .._tensor import Tensor
from ..autograd.grad_mode import no_grad

__all__ = ["SparseTensor", "sparse_coo_tensor", "to_sparse"]


def _prod(sizes):
    n = 1
    for s in sizes:
        n *= s
    return n


def _make(indices, values, size, coalesced):
    """A SparseTensor over these indices and values (no checks)."""
    placeholder = _C._ops.empty(list(size), dtype=values.dtype, device="meta")
    s = _C.TensorBase.__new__(SparseTensor)
    _C.TensorBase.__init__(s, placeholder)
    s._sp_indices = indices
    s._sp_values = values
    s._sp_coalesced = bool(coalesced)
    return s


def _check_cpu(device, what):
    if device is not None and _C.device(device).type != "cpu":
        raise NotImplementedError(f"{what}: sparse tensors (layout kiln.sparse_coo) are supported on the CPU only, "
                                  f"not on {_C.device(device)}")


def _linear_index(indices, sparse_sizes):
    """Each entry's row-major position among the sparse dims (int64, nnz)."""
    strides, stride = [], 1
    for s in reversed(sparse_sizes):
        strides.append(stride)
        stride *= s
    strides.reverse()
    lin = _C._ops.zeros([indices.shape[1]], dtype=_C.int64)
    for d, st in enumerate(strides):
        lin = lin + indices[d] * st
    return lin


def _unravel(lin, sparse_sizes):
    rows, stride = [], _prod(sparse_sizes)
    for s in sparse_sizes:
        stride //= s
        rows.append((lin // stride) % s)
    if not rows:
        return _C._ops.zeros([0, lin.shape[0]], dtype=_C.int64)
    return _C._ops.stack(rows)


def _sum_rows(values, index, n):
    """out[index[k]] += values[k] for out of n rows (bool values: any)."""
    shape = [n] + list(values.shape[1:])
    if values.dtype == _C.bool:
        return _C._ops.zeros(shape, dtype=_C.int64).index_add(0, index, values.to(_C.int64)) != 0
    return _C._ops.zeros(shape, dtype=values.dtype).index_add(0, index, values)


def _unique_pattern(s):
    """The sorted distinct index columns of s and, for each entry, which of them it is."""
    from .._indexing import unique

    sparse_sizes = list(s.shape[:s.sparse_dim()])
    if s._nnz() == 0:
        return s._sp_indices, s._sp_indices.new_zeros([0]), 0
    lin = _linear_index(s._sp_indices, sparse_sizes)
    uniq, inverse = unique(lin, sorted=True, return_inverse=True)
    return _unravel(uniq, sparse_sizes), inverse, int(uniq.shape[0])


class SparseTensor(Tensor):
    """A sparse COO tensor (layout kiln.sparse_coo): torch's sparse_coo tensors, on the CPU."""

    # -- what a sparse tensor is --------------------------------------------------------------
    layout = property(lambda self: sparse_coo)
    is_sparse = property(lambda self: True)
    device = property(lambda self: self._sp_values.device)
    is_cpu = property(lambda self: self._sp_values.is_cpu)
    is_cuda = property(lambda self: False)
    is_meta = property(lambda self: False)

    def sparse_dim(self):
        return int(self._sp_indices.shape[0])

    def dense_dim(self):
        return self._sp_values.dim() - 1

    def _nnz(self):
        return int(self._sp_indices.shape[1])

    def is_coalesced(self):
        return self._sp_coalesced

    def _indices(self):
        return self._sp_indices

    def _values(self):
        return self._sp_values

    def indices(self):
        if not self._sp_coalesced:
            raise RuntimeError("Cannot get indices on an uncoalesced tensor, please call .coalesce() first")
        return self._sp_indices

    def values(self):
        if not self._sp_coalesced:
            raise RuntimeError("Cannot get values on an uncoalesced tensor, please call .coalesce() first")
        return self._sp_values

    # -- autograd: the values carry it ----------------------------------------------------------
    @property
    def requires_grad(self):
        return self._sp_values.requires_grad

    @requires_grad.setter
    def requires_grad(self, flag):
        self._sp_values.requires_grad_(flag)

    def requires_grad_(self, requires_grad=True):
        self._sp_values.requires_grad_(requires_grad)
        return self

    @property
    def is_leaf(self):
        return self._sp_values.is_leaf

    @property
    def grad_fn(self):
        return self._sp_values.grad_fn

    @property
    def grad(self):
        """As torch's: sparse, with this tensor's coalesced pattern (a gradient of the tensor it
        stands for, so duplicate entries share one value)."""
        g = self._sp_values.grad
        if g is None:
            return None
        with no_grad():
            indices, inverse, n = _unique_pattern(self)
            out = _C._ops.zeros([n] + list(g.shape[1:]), dtype=g.dtype).index_copy(0, inverse, g)
        return _make(indices, out, self.shape, True)

    @grad.setter
    def grad(self, value):
        if value is not None:
            raise NotImplementedError("setting .grad of a sparse tensor (layout kiln.sparse_coo) to a tensor")
        self._sp_values.grad = None

    def backward(self, *args, **kwargs):
        raise NotImplementedError("backward() from a sparse tensor (layout kiln.sparse_coo): call .to_dense() "
                                  "or kiln.sparse.sum() first")

    def detach(self):
        return _make(self._sp_indices, self._sp_values.detach(), self.shape, self._sp_coalesced)

    @property
    def data(self):
        return self.detach()

    @data.setter
    def data(self, value):
        if not isinstance(value, SparseTensor):
            raise NotImplementedError("assigning .data across layouts (a strided tensor's data to a sparse one)")
        keep_grad = self.is_leaf and self.requires_grad
        self._sp_indices, self._sp_values = value._sp_indices, value._sp_values.detach().requires_grad_(keep_grad)
        self._sp_coalesced = value._sp_coalesced
        if tuple(value.shape) != tuple(self.shape) or value.dtype != self.dtype:
            _C.TensorBase._set_data(self, _C._ops.empty(list(value.shape), dtype=value.dtype, device="meta"))

    def clone(self, *, memory_format=None):
        return _make(self._sp_indices.clone(), self._sp_values.clone(), self.shape, self._sp_coalesced)

    # -- conversions ----------------------------------------------------------------------------
    def coalesce(self):
        """Entries sorted by index (row-major), duplicates summed; self when already coalesced."""
        if self._sp_coalesced:
            return self
        indices, inverse, n = _unique_pattern(self)
        values = _sum_rows(self._sp_values, inverse, n)
        return _make(indices, values, self.shape, True)

    def to_dense(self, dtype=None, *, masked_grad=None):
        sd = self.sparse_dim()
        sparse_sizes = list(self.shape[:sd])
        rows = _sum_rows(self._sp_values, _linear_index(self._sp_indices, sparse_sizes), _prod(sparse_sizes))
        dense = rows.reshape(list(self.shape))
        return dense if dtype is None else dense.to(dtype)

    def to_sparse(self, sparse_dim=None):
        if sparse_dim is not None and sparse_dim != self.sparse_dim():
            raise RuntimeError("to_sparse: conversion from Sparse to Sparse with sparse_dim argument "
                               "!=self.sparse_dim() is not supported")
        return self

    def to_sparse_coo(self):
        return self

    def to(self, *args, **kwargs):
        from ._dispatch import parse_to

        dtype, device, copy = parse_to(self, args, kwargs)
        _check_cpu(device, "to")
        if dtype is None or dtype == self.dtype:
            return self.clone() if copy else self
        return _make(self._sp_indices, self._sp_values.to(dtype), self.shape, self._sp_coalesced)

    def t(self):
        if self.dim() > 2:
            raise RuntimeError(f"t() expects a tensor with <= 2 dimensions, but self is {self.dim()}D")
        return self if self.dim() < 2 else self.transpose(0, 1)

    def transpose(self, dim0, dim1):
        from ._dispatch import wrap_dim

        d0, d1 = wrap_dim(dim0, self.dim()), wrap_dim(dim1, self.dim())
        sd = self.sparse_dim()
        if (d0 < sd) != (d1 < sd):
            raise RuntimeError("transpose(): can't transpose a sparse dim with a dense dim of a sparse tensor "
                               f"(dims {dim0} and {dim1}; sparse_dim={sd})")
        size = list(self.shape)
        size[d0], size[d1] = size[d1], size[d0]
        if d0 < sd:
            order = list(range(sd))
            order[d0], order[d1] = order[d1], order[d0]
            indices = self._sp_indices[order] if sd else self._sp_indices
            return _make(indices, self._sp_values, size, (self._sp_coalesced and d0 == d1) or self._nnz() == 0)
        values = self._sp_values.transpose(d0 - sd + 1, d1 - sd + 1)
        return _make(self._sp_indices, values, size, self._sp_coalesced)

    T = property(lambda self: self.t() if self.dim() <= 2 else self._refuse("T"))
    mT = property(lambda self: self.transpose(-2, -1))

    # -- what a sparse tensor does not have -----------------------------------------------------
    def _refuse(self, what, exc=NotImplementedError):
        raise exc(f"{what} is not supported for sparse tensors (layout kiln.sparse_coo, size {list(self.shape)}, "
                  f"{self.dtype}); call .to_dense() first")

    def stride(self, dim=None):
        self._refuse("stride()", RuntimeError)

    def storage_offset(self):
        self._refuse("storage_offset()", RuntimeError)

    def data_ptr(self):
        raise RuntimeError("Cannot access data pointer of Tensor that doesn't have storage")

    def is_contiguous(self, memory_format=None):
        return False

    def contiguous(self, memory_format=None):
        self._refuse("contiguous()", RuntimeError)

    def numpy(self, *, force=False):
        raise TypeError("can't convert Sparse layout tensor to numpy. Use Tensor.to_dense() first.")

    def __array__(self, dtype=None, copy=None):
        return self.numpy()

    def tolist(self):
        self._refuse("tolist()")

    def item(self):
        if self.numel() != 1:
            raise RuntimeError(f"a Tensor with {self.numel()} elements cannot be converted to Scalar")
        return self.to_dense().item()

    def __getitem__(self, index):
        self._refuse("indexing")

    def __setitem__(self, index, value):
        self._refuse("index assignment")

    def __iter__(self):
        self._refuse("iteration")

    def __dlpack__(self, *args, **kwargs):
        self._refuse("__dlpack__", RuntimeError)

    def as_subclass(self, cls):
        self._refuse("as_subclass")

    def _set_data(self, value):
        self._refuse("assigning .data", RuntimeError)

    def __repr__(self):
        from .._tensor_str import _add_suffixes, _tensor_str

        prefix = "tensor("
        indent = len(prefix)
        suffixes = [f"size={tuple(self.shape)}", f"nnz={self._nnz()}"]
        if self.dtype not in (_C.float32, _C.int64, _C.bool, _C.complex64):
            suffixes.append(f"dtype={self.dtype}")
        suffixes.append("layout=kiln.sparse_coo")
        parts = []
        for name, t in (("indices", self._sp_indices), ("values", self._sp_values)):
            head = f"{name}=tensor("
            body = _tensor_str(t.detach(), indent + len(head))
            if t.numel() == 0:
                body += f", size={tuple(t.shape)}"
            parts.append(head + body + ")")
        body = parts[0] + ",\n" + " " * indent + parts[1]
        if self.grad_fn is not None:
            suffixes.append(f"grad_fn=<{self.grad_fn.name()}>")
        elif self.requires_grad:
            suffixes.append("requires_grad=True")
        return _add_suffixes(prefix + body, suffixes, indent, force_newline=True)

    # -- copies, pickling -----------------------------------------------------------------------
    def __reduce_ex__(self, proto):
        """As torch pickles one: its indices, values, size and coalesced flag (not requires_grad)."""
        return (_rebuild_sparse, (self._sp_indices, self._sp_values.detach(), tuple(self.shape), self._sp_coalesced))

    def __deepcopy__(self, memo):
        if not self.is_leaf:
            raise RuntimeError("Only Tensors created explicitly by the user (graph leaves) support the "
                               "deepcopy protocol at the moment.")
        if id(self) in memo:
            return memo[id(self)]
        new = self.detach().clone()
        new._sp_values.requires_grad_(self.requires_grad)
        memo[id(self)] = new
        return new

    def __copy__(self):
        return _make(self._sp_indices, self._sp_values, self.shape, self._sp_coalesced)

    def copy_(self, src, non_blocking=False):
        """Takes src's entries (torch's copy_ of sparse into sparse), or raises."""
        if not isinstance(src, SparseTensor):
            raise NotImplementedError("copy_ of a dense tensor into a sparse tensor (layout kiln.sparse_coo)")
        if tuple(src.shape) != tuple(self.shape) or src.sparse_dim() != self.sparse_dim():
            raise RuntimeError(f"copy_: a sparse tensor of size {list(self.shape)} (sparse_dim {self.sparse_dim()}) "
                               f"cannot take the entries of one of size {list(src.shape)} "
                               f"(sparse_dim {src.sparse_dim()})")
        self._sp_indices = src._sp_indices.clone()
        self._sp_values = src._sp_values.detach().to(self.dtype).clone()
        self._sp_coalesced = src._sp_coalesced
        return self


def _rebuild_sparse(indices, values, size, coalesced):
    return _make(indices, values, size, coalesced)


def _as_tensor(data, dtype=None):
    from .._creation import tensor

    if isinstance(data, SparseTensor):
        raise TypeError("sparse_coo_tensor: indices and values must be dense tensors, not sparse ones")
    if isinstance(data, Tensor):
        return data if dtype is None or data.dtype == dtype else data.to(dtype)
    return tensor(data, dtype=dtype)


def _check_invariants(indices, size, sparse_dim):
    if indices.shape[1] == 0:
        return
    lo = indices.amin(1).tolist()
    hi = indices.amax(1).tolist()
    for d in range(sparse_dim):
        if lo[d] < 0:
            raise RuntimeError(f"found negative index {lo[d]} for dim {d}")
        if hi[d] >= size[d]:
            raise RuntimeError(f"size is inconsistent with indices: for dim {d}, size is {size[d]} but found index {hi[d]}")


def sparse_coo_tensor(indices, values, size=None, *, dtype=None, device=None, pin_memory=False,
                      requires_grad=False, check_invariants=None, is_coalesced=None):
    """A sparse COO tensor with `values[k]` at `indices[:, k]` (torch.sparse_coo_tensor).

    indices: int-like, sparse_dim x nnz (converted to int64); values: nnz x dense sizes. Without
    `size` the sparse sizes are the largest index + 1 along each sparse dim. kiln always checks
    that the indices lie within `size` (torch does with check_invariants=True): an op on an index
    out of range would fail later, further from the mistake. Duplicates are allowed (the
    tensor is uncoalesced; they sum)."""
    _check_cpu(device, "sparse_coo_tensor")
    if isinstance(values, Tensor):
        _check_cpu(values.device, "sparse_coo_tensor")
    indices = _as_tensor(indices)
    values = _as_tensor(values, dtype)
    if indices.dtype.is_complex or indices.dtype == _C.bool:
        raise RuntimeError(f"sparse_coo_tensor: indices must be an integer tensor, got {indices.dtype}")
    indices = indices.detach().to(_C.int64)
    if indices.dim() != 2:
        raise RuntimeError(f"indices must be sparse_dim x nnz, but got: {list(indices.shape)}")
    if values.dim() == 0:
        raise RuntimeError("values must be at least 1-dimensional (nnz x dense sizes), got a 0-d tensor")
    sparse_dim, nnz = int(indices.shape[0]), int(indices.shape[1])
    dense_dim = values.dim() - 1
    if values.shape[0] != nnz:
        raise RuntimeError(f"indices and values must have same nnz, but got nnz from indices: {nnz}, "
                           f"nnz from values: {values.shape[0]}")
    if size is None:
        hi = indices.amax(1).tolist() if nnz else [-1] * sparse_dim
        size = [h + 1 for h in hi] + list(values.shape[1:])
        if nnz and min(indices.amin(1).tolist()) < 0:
            raise RuntimeError(f"found negative index {min(indices.amin(1).tolist())} in the indices")
    else:
        size = [int(s) for s in size]
        if len(size) != sparse_dim + dense_dim:
            raise RuntimeError(f"'len(size) == sparse_dim + dense_dim' is not satisfied: len(size) = {len(size)}, "
                               f"sparse_dim = {sparse_dim}, dense_dim = {dense_dim}")
        if list(values.shape[1:]) != size[sparse_dim:]:
            raise RuntimeError(f"values has incorrect size, expected {[nnz] + size[sparse_dim:]}, "
                               f"got {list(values.shape)}")
        if any(s < 0 for s in size):
            raise RuntimeError(f"Trying to create tensor with negative dimension: {size}")
    _check_invariants(indices, size, sparse_dim)
    if requires_grad:
        if not (values.dtype.is_floating_point or values.dtype.is_complex):
            raise RuntimeError("Only Tensors of floating point and complex dtype can require gradients")
        values = values.detach().requires_grad_(True)
    elif values.requires_grad:
        values = values.view(list(values.shape))  # a new object, in values' graph
    else:
        values = values.detach()
    coalesced = bool(is_coalesced) if is_coalesced is not None else nnz <= 1
    if check_invariants and is_coalesced:
        probe = _make(indices, values, size, False).coalesce()
        if probe._nnz() != nnz or not bool((probe._sp_indices == indices).all()):
            raise RuntimeError("is_coalesced=True, but the indices are not sorted and unique")
    return _make(indices, values, size, coalesced)


def to_sparse(self, sparse_dim=None, *, layout=None, blocksize=None, dense_dim=None):
    """Tensor.to_sparse(): the nonzero entries of a dense tensor (NaN counts as nonzero, -0.0
    does not), coalesced. With sparse_dim < dim, the trailing dims stay dense: a slice is an
    entry when any of its values is nonzero."""
    if layout is not None and layout is not sparse_coo:
        raise NotImplementedError(f"to_sparse: layout {layout} (kiln has kiln.sparse_coo only)")
    if blocksize is not None or dense_dim is not None:
        raise NotImplementedError("to_sparse: blocksize and dense_dim are for the compressed layouts kiln lacks")
    _check_cpu(self.device, "to_sparse")
    nd = self.dim()
    sd = nd if sparse_dim is None else int(sparse_dim)
    if nd > 0 and sd <= 0:
        raise RuntimeError("dense_to_sparse: sparse_dim argument must be in >0 when self.dim()>0")
    if sd > nd:
        raise RuntimeError(f"sparse_dim must be less than or equal to self.dim(), got sparse_dim={sd}, "
                           f"self.dim()={nd}")
    with no_grad():
        mask = self != 0
        if sd < nd:
            mask = mask.reshape(list(self.shape[:sd]) + [-1]).any(-1)
        indices = mask.nonzero().t().contiguous() if nd else _C._ops.zeros([0, int(bool(mask))], dtype=_C.int64)
    if nd == 0:
        values = self.reshape([1]) if indices.shape[1] else self.reshape([1])[:0]
    else:
        values = self[tuple(indices[d] for d in range(sd))]
    return _make(indices, values, list(self.shape), True)
