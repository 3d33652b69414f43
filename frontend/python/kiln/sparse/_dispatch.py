"""The ops kiln has for sparse COO tensors, and the handler that kiln's op objects call when an
argument is one (frontend/binding/OpFunction.cpp: `handle(name, args, kwargs)`).

Each op is written in dense ops on the indices and values (kiln/sparse/_coo.py), so autograd
and every dtype come from the dense ops. An op without an entry here raises torch's
NotImplementedError for a sparse backend, naming the op and its arguments' layouts, shapes and
dtypes, rather than computing on the tensor's placeholder.
"""
from .. import _C
from .._tensor import Tensor
from ._coo import SparseTensor, _check_cpu, _make, _unique_pattern

_OPS = {}


def _op(*names):
    def register(fn):
        for name in names:
            _OPS[name] = fn
        return fn
    return register


def _describe(x):
    if isinstance(x, SparseTensor):
        return f"sparse {x.dtype} of size {list(x.shape)}"
    if isinstance(x, Tensor):
        return f"{x.dtype} of size {list(x.shape)}"
    if isinstance(x, (list, tuple)) and any(isinstance(i, Tensor) for i in x):
        return "[" + ", ".join(_describe(i) for i in x) + "]"
    return repr(x) if isinstance(x, (int, float, bool, str)) or x is None else type(x).__name__


def handle(name, args, kwargs):
    fn = _OPS.get(name)
    if fn is None:
        described = ", ".join([_describe(a) for a in args] + [f"{k}={_describe(v)}" for k, v in kwargs.items()])
        raise NotImplementedError(
            f"Could not run 'aten::{name}' with arguments from the 'SparseCPU' backend: kiln has no sparse "
            f"(layout kiln.sparse_coo) kernel for {name} (called with {described}). Call .to_dense() first.")
    return fn(*args, **kwargs)


def wrap_dim(d, ndim):
    if not -max(ndim, 1) <= d < max(ndim, 1):
        raise IndexError(f"Dimension out of range (expected to be in range of [{-max(ndim, 1)}, {max(ndim, 1) - 1}], "
                         f"but got {d})")
    return d % max(ndim, 1)


def parse_to(self, args, kwargs):
    """Tensor.to's arguments: (dtype, device, copy)."""
    dtype = kwargs.pop("dtype", None)
    device = kwargs.pop("device", None)
    copy = kwargs.pop("copy", False)
    kwargs.pop("non_blocking", None)
    kwargs.pop("memory_format", None)
    if kwargs:
        raise TypeError(f"to() got an unexpected keyword argument '{next(iter(kwargs))}'")
    for a in args:
        if isinstance(a, Tensor):
            dtype, device = a.dtype, a.device
        elif isinstance(a, _C.dtype):
            dtype = a
        elif isinstance(a, (str, _C.device, int)):
            device = a
        elif isinstance(a, bool):
            copy = a
        else:
            raise TypeError(f"to() received an invalid combination of arguments: {type(a).__name__}")
    return dtype, device, copy


def _is_sparse(x):
    return isinstance(x, SparseTensor)


def _check_2d_sparse(s, op):
    if s.sparse_dim() != 2 or s.dense_dim() != 0:
        raise NotImplementedError(f"{op}: a sparse operand must be 2-D with 2 sparse dims and no dense dims, got "
                                  f"size {list(s.shape)} with sparse_dim={s.sparse_dim()}, dense_dim={s.dense_dim()}")


def spmm(s, d, op="mm"):
    """sparse (n x m) @ dense (m x k): out[row] += value * d[col] for each entry (or, for a
    matrix dense enough, to_dense() @ d)."""
    _check_2d_sparse(s, op)
    if _is_sparse(d):
        raise NotImplementedError(f"{op}: sparse @ sparse (sizes {list(s.shape)} and {list(d.shape)}): kiln "
                                  "multiplies a sparse matrix by a dense one only")
    if not isinstance(d, Tensor):
        raise TypeError(f"{op}(): argument 'mat2' must be Tensor, not {type(d).__name__}")
    if d.dim() != 2:
        raise RuntimeError(f"{op}: mat2 must be a matrix, got {d.dim()}-D tensor")
    if d.shape[0] != s.shape[1]:
        raise RuntimeError(f"{op}: Argument #3 (dense): Expected dim 0 size {s.shape[1]}, got {d.shape[0]} "
                           f"(sparse {list(s.shape)} @ dense {list(d.shape)})")
    if d.dtype != s.dtype:
        raise RuntimeError(f"expected scalar type {_scalar_name(s.dtype)} but found {_scalar_name(d.dtype)} "
                           f"({op} of a sparse {s.dtype} matrix and a dense {d.dtype} one)")
    _check_cpu(d.device, op)
    if s.shape[0] * s.shape[1] <= s._nnz() * d.shape[1] and d.dtype.is_floating_point:
        # A dense matrix no larger than the products the scatter below would make: densify and
        # use the GEMM (a third of the time on Cora's features; the gradients are the same).
        return _C._ops.mm(s.to_dense(), d)
    rows, cols = s._sp_indices[0], s._sp_indices[1]
    contributions = s._sp_values.unsqueeze(1) * d.index_select(0, cols)
    out = _C._ops.zeros([s.shape[0], d.shape[1]], dtype=d.dtype)
    return out.index_add(0, rows, contributions)


_SCALAR_NAMES = {_C.float32: "Float", _C.float64: "Double", _C.float16: "Half", _C.bfloat16: "BFloat16",
                 _C.int64: "Long", _C.int32: "Int", _C.int16: "Short", _C.int8: "Char", _C.uint8: "Byte",
                 _C.bool: "Bool"}


def _scalar_name(dtype):
    return _SCALAR_NAMES.get(dtype, str(dtype))


def _check_dense_mat1_grad(s, op):
    # torch.mm's gradient for a sparse mat1 is a dense (unmasked) matrix, which a sparse leaf
    # cannot hold here; kiln.sparse.mm's (masked to the pattern) is what kiln gives.
    if s.requires_grad:
        raise NotImplementedError(f"{op}: the gradient of a sparse input that requires grad (torch gives a dense "
                                  "one here); use kiln.sparse.mm, whose gradient is sparse with the input's pattern")


@_op("mm", "spmm")
def mm(self, mat2):
    if _is_sparse(self):
        _check_dense_mat1_grad(self, "mm")
        return spmm(self, mat2)
    # dense @ sparse = (sparse^T @ dense^T)^T
    if not isinstance(self, Tensor) or self.dim() != 2:
        raise RuntimeError(f"mm: self must be a matrix, got {_describe(self)}")
    _check_dense_mat1_grad(mat2, "mm")
    return spmm(mat2.t(), self.t(), "mm").t()


@_op("matmul")
def matmul(self, other):
    if _is_sparse(self) and isinstance(other, Tensor) and not _is_sparse(other) and other.dim() == 1:
        return mm(self, other.unsqueeze(1)).squeeze(1)
    if not _is_sparse(self) and isinstance(self, Tensor) and self.dim() == 1:
        return mm(self.unsqueeze(0), other).squeeze(0)
    if self.dim() != 2 or other.dim() != 2:
        raise NotImplementedError(f"matmul of {_describe(self)} and {_describe(other)}: kiln multiplies 2-D sparse "
                                  "matrices (and vectors) only")
    return mm(self, other)


@_op("addmm")
def addmm(self, mat1, mat2, *, beta=1, alpha=1):
    if _is_sparse(self) or _is_sparse(mat2) or not _is_sparse(mat1):
        raise NotImplementedError(f"addmm with {_describe(self)}, {_describe(mat1)}, {_describe(mat2)}: kiln's "
                                  "sparse addmm takes a dense input, a sparse mat1 and a dense mat2")
    _check_dense_mat1_grad(mat1, "addmm")
    product = spmm(mat1, mat2, "addmm")
    if alpha != 1:
        product = product * alpha
    if beta == 0:
        return product + _C._ops.zeros_like(self).expand(list(product.shape))
    return product + (self if beta == 1 else self * beta)


def _add(self, other, alpha, op):
    if _is_sparse(self) and _is_sparse(other):
        if tuple(self.shape) != tuple(other.shape):
            raise RuntimeError(f"{op}: expected sizes of 'self' and 'other' to match, but {list(self.shape)} != "
                               f"{list(other.shape)}")
        if self.sparse_dim() != other.sparse_dim():
            raise RuntimeError(f"{op}: expected 'self' and 'other' to have same sparse dimensions, but "
                               f"{self.sparse_dim()} != {other.sparse_dim()}")
        ov = other._sp_values if alpha == 1 else other._sp_values * alpha
        from .._promotion import promote_types

        dtype = promote_types(self.dtype, ov.dtype)
        return _merge(self, self._sp_values.to(dtype), other, ov.to(dtype))
    if _is_sparse(self):
        raise RuntimeError(f"{op}(sparse, dense) is not supported. Use {op}(dense, sparse) instead.")
    if not isinstance(self, Tensor):
        raise NotImplementedError(f"{op}({_describe(self)}, sparse tensor)")
    dense = other.to_dense()
    return _C._ops.add(self, dense, alpha=alpha)


def _merge(a, av, b, bv):
    """a + b as torch adds two sparse tensors: one merge pass over both entry lists by
    (row-major) index, in their stored order, adding entries whose indices meet. Coalesced
    inputs give the coalesced sum; otherwise the result keeps both lists' entries in merge order."""
    from ._coo import _linear_index

    sizes = list(a.shape[:a.sparse_dim()])
    la = _linear_index(a._sp_indices, sizes).tolist()
    lb = _linear_index(b._sp_indices, sizes).tolist()
    slot_a, slot_b, slots = [], [], []  # each entry's place in the result; the result's index
    i = j = 0
    while i < len(la) or j < len(lb):
        if j == len(lb) or (i < len(la) and la[i] < lb[j]):
            slot_a.append(len(slots))
            slots.append(la[i])
            i += 1
        elif i == len(la) or la[i] > lb[j]:
            slot_b.append(len(slots))
            slots.append(lb[j])
            j += 1
        else:
            slot_a.append(len(slots))
            slot_b.append(len(slots))
            slots.append(la[i])
            i += 1
            j += 1
    shape = [len(slots)] + list(av.shape[1:])
    values = _C._ops.zeros(shape, dtype=av.dtype)
    if slot_a:
        values = values.index_add(0, _long(slot_a), av)
    if slot_b:
        values = values.index_add(0, _long(slot_b), bv)
    from ._coo import _unravel

    indices = _unravel(_long(slots), sizes)
    return _make(indices, values, a.shape, a._sp_coalesced and b._sp_coalesced)


def _long(ints):
    from .._creation import tensor

    return tensor(ints, dtype=_C.int64)


@_op("add")
def add(self, other, *, alpha=1):
    return _add(self, other, alpha, "add")


@_op("sub")
def sub(self, other, *, alpha=1):
    return _add(self, other, -alpha, "sub")


def _scale(self, other, op, fn):
    if _is_sparse(self) and not _is_sparse(other):
        if isinstance(other, (int, float, bool)) or (isinstance(other, Tensor) and other.dim() == 0):
            return _make(self._sp_indices, fn(self._sp_values, other), self.shape, self._sp_coalesced)
    raise NotImplementedError(f"{op} of {_describe(self)} and {_describe(other)}: kiln scales a sparse tensor by "
                              "a number or a 0-d tensor only")


@_op("mul")
def mul(self, other):
    if not _is_sparse(self):
        self, other = other, self
    return _scale(self, other, "mul", _C._ops.mul)


@_op("div")
def div(self, other, *, rounding_mode=None):
    if rounding_mode is not None:
        raise NotImplementedError(f"div of a sparse tensor with rounding_mode={rounding_mode!r}")
    return _scale(self, other, "div", _C._ops.div)


@_op("neg")
def neg(self):
    return _make(self._sp_indices, -self._sp_values, self.shape, self._sp_coalesced)


@_op("sum")
def sparse_sum(self, dim=None, keepdim=False, *, dtype=None):
    """kiln.sparse.sum: over all dims a 0-d dense tensor; over some sparse dims a sparse tensor
    (dense when no sparse dim is left), with the dense dims summed in the values."""
    if keepdim:
        raise NotImplementedError("sum of a sparse tensor with keepdim=True")
    values = self._sp_values if dtype is None else self._sp_values.to(dtype)
    if values.dtype in (_C.bool, _C.uint8, _C.int8, _C.int16, _C.int32):
        values = values.to(_C.int64)  # as torch's sum: integers add up in int64
    if dim is None:
        return values.sum()
    dims = [dim] if isinstance(dim, int) else list(dim)
    nd, sd = self.dim(), self.sparse_dim()
    dims = sorted({wrap_dim(d, nd) for d in dims})
    dense_dims = [d - sd + 1 for d in dims if d >= sd]
    if dense_dims:
        values = values.sum(dense_dims)
    sparse_dims = [d for d in dims if d < sd]
    if not sparse_dims:
        size = [s for i, s in enumerate(self.shape) if i not in dims]
        return _make(self._sp_indices, values, size, self._sp_coalesced)
    keep = [d for d in range(sd) if d not in sparse_dims]
    if not keep:
        return values.sum(0)
    size = [s for i, s in enumerate(self.shape) if i not in dims]
    reduced = _make(self._sp_indices[keep], values, size, False)
    return reduced.coalesce()


@_op("t")
def t(self):
    return self.t()


@_op("transpose")
def transpose(self, dim0, dim1):
    return self.transpose(dim0, dim1)


@_op("clone")
def clone(self, *, memory_format=None):
    return self.clone()


@_op("detach")
def detach(self):
    return self.detach()


@_op("to")
def to(self, *args, **kwargs):
    return self.to(*args, **kwargs)


@_op("copy_")
def copy_(self, src, non_blocking=False):
    if _is_sparse(self):
        return self.copy_(src)
    return _C._ops.copy_(self, src.to_dense(), non_blocking)


@_op("zeros_like")
def zeros_like(self, *, dtype=None, layout=None, device=None, pin_memory=None, requires_grad=False,
               memory_format=None):
    _check_cpu(device, "zeros_like")
    values = _C._ops.zeros([0] + list(self._sp_values.shape[1:]), dtype=dtype or self.dtype)
    out = _make(self._sp_indices[:, :0], values, self.shape, True)
    return out.requires_grad_() if requires_grad else out


def softmax(input, dim, dtype=None, log=False):
    """kiln.sparse.softmax (log_softmax with log=True): a softmax over each slice along `dim` of
    the specified entries only (unspecified ones count as -inf), with input's coalesced pattern."""
    if not _is_sparse(input):
        raise TypeError(f"sparse.softmax: expected a sparse tensor, got {_describe(input)}")
    s = input.coalesce()
    values = s._sp_values if dtype is None else s._sp_values.to(dtype)
    nd, sd = s.dim(), s.sparse_dim()
    d = wrap_dim(dim, nd)
    if d >= sd:  # a dense dim: each entry's slice on its own
        out = values.log_softmax(d - sd + 1) if log else values.softmax(d - sd + 1)
        return _make(s._sp_indices, out, s.shape, True)
    if s._nnz() == 0:
        return _make(s._sp_indices, values, s.shape, True)
    others = [i for i in range(sd) if i != d]
    from ._coo import _linear_index
    from .._indexing import unique

    key = _linear_index(s._sp_indices[others], [s.shape[i] for i in others])
    _, group = unique(key, sorted=True, return_inverse=True)
    ngroups = int(group.max()) + 1
    from .._composites_extra import index_reduce

    trailing = list(values.shape[1:])
    peak = index_reduce(_C._ops.zeros([ngroups] + trailing, dtype=values.dtype), 0, group, values.detach(),
                        "amax", include_self=False)
    shifted = values - peak.index_select(0, group)
    e = shifted.exp()
    total = _C._ops.zeros([ngroups] + trailing, dtype=values.dtype).index_add(0, group, e)
    out = shifted - total.log().index_select(0, group) if log else e / total.index_select(0, group)
    return _make(s._sp_indices, out, s.shape, True)


