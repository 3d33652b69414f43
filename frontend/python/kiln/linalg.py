"""`kiln.linalg` (torch.linalg): the norms real model code calls (gradient clipping, metric
learning, normalisation by hand) as compositions of `kiln.norm` and reductions, so they trace and
differentiate like any other ops; the factorizations and solves (inv, det, solve, cholesky, qr,
eigh, svd, ...) as ops of the table on LAPACK (kiln/_lapack.py), which kiln.compile captures;
lstsq, lu, eig and matrix_exp on numpy (kiln/_lapack_general.py, a graph break when compiled);
the spectral norms (ord 2, -2, 'nuc') from svdvals."""
import math

from ._lapack import (  # noqa: F401
    LinAlgError, cholesky, cholesky_ex, det, eigh, eigvalsh, inv, inv_ex, matrix_rank, pinv, qr, slogdet, solve,
    solve_triangular, svd, svdvals,
)
from ._lapack_general import (  # noqa: F401
    eig, eigvals, lstsq, lu, lu_factor, lu_factor_ex, lu_solve, matrix_exp,
)


def _dims(dim, ndim):
    dims = (dim,) if isinstance(dim, int) else tuple(dim)
    return tuple(d % ndim if -ndim <= d < ndim else d for d in dims)


def _check_float(op, x, dtype):
    dt = dtype if dtype is not None else x.dtype
    if not (dt.is_floating_point or dt.is_complex):
        raise RuntimeError(f"linalg.{op}: Expected a floating point or complex tensor as input. Got {x.dtype}")


def vector_norm(x, ord=2, dim=None, keepdim=False, *, dtype=None):
    """The ord-norm of x's elements over `dim` (all of them when None), as a vector."""
    _check_float("vector_norm", x, dtype)
    if isinstance(ord, str):
        raise RuntimeError(f"linalg.vector_norm: ord must be a number, got '{ord}'")
    return x.norm(p=ord, dim=dim, keepdim=keepdim, dtype=dtype)


def matrix_norm(A, ord="fro", dim=(-2, -1), keepdim=False, *, dtype=None):
    """The matrix norm over the two dims `dim`: 'fro', or the induced 1 / -1 / inf / -inf norms
    (max / min absolute column or row sum)."""
    _check_float("matrix_norm", A, dtype)
    nd = A.dim()
    if nd < 2:
        raise RuntimeError(f"linalg.matrix_norm: The input tensor A must have at least 2 dimensions, got {nd}")
    dims = _dims(dim, nd)
    if len(dims) != 2 or dims[0] == dims[1] or not all(0 <= d < nd for d in dims):
        raise RuntimeError(f"linalg.matrix_norm: dim must be a 2-tuple of different dimensions of a "
                           f"{nd}-D tensor, got {dim}")
    if dtype is not None:
        A = A.to(dtype)
    if ord == "fro":
        return A.norm(p=2, dim=dims, keepdim=keepdim)
    if ord in ("nuc", 2, -2):
        # the singular values of the matrices over dims (moved last): their sum, max or min
        rest = [d for d in range(nd) if d not in dims]
        s = svdvals(A.permute(rest + list(dims)))
        out = s.sum(-1) if ord == "nuc" else s.amax(-1) if ord == 2 else s.amin(-1)
        if keepdim:
            for d in sorted(dims):
                out = out.unsqueeze(d)
        return out
    if ord not in (1, -1, math.inf, -math.inf):
        raise RuntimeError(f"linalg.matrix_norm: Order {ord} not supported.")
    # ord +-1: the column sums (summing over the rows, dims[0]); +-inf: the row sums.
    summed, other = (dims[0], dims[1]) if abs(ord) == 1 else (dims[1], dims[0])
    sums = A.abs().sum(dim=summed, keepdim=True)
    out = sums.amax(dim=other, keepdim=True) if ord > 0 else sums.amin(dim=other, keepdim=True)
    return out if keepdim else out.squeeze(max(dims)).squeeze(min(dims))


def norm(A, ord=None, dim=None, keepdim=False, *, dtype=None):
    """torch.linalg.norm: a vector norm over one dim (or all elements when both ord and dim are
    None), a matrix norm over two dims (or of a 2-D input when ord is given and dim is not)."""
    if dim is not None:
        dims = (dim,) if isinstance(dim, int) else tuple(dim)
        if len(dims) == 1:
            return vector_norm(A, 2 if ord is None else ord, dims, keepdim, dtype=dtype)
        if len(dims) == 2:
            return matrix_norm(A, "fro" if ord is None else ord, dims, keepdim, dtype=dtype)
        raise RuntimeError(f"linalg.norm: If dim is specified, it must be of length 1 or 2. Got {list(dims)}")
    if ord is None:
        return vector_norm(A, 2, None, keepdim, dtype=dtype)
    if A.dim() == 1:
        return vector_norm(A, ord, None, keepdim, dtype=dtype)
    if A.dim() == 2:
        return matrix_norm(A, ord, (-2, -1), keepdim, dtype=dtype)
    raise RuntimeError(f"linalg.norm: If dim is not specified but ord is, the input must be 1D or 2D. "
                       f"Got {A.dim()}D.")


def cross(input, other, *, dim=-1):
    """The 3-vector cross product along dim (default the last, unlike torch.cross's)."""
    from ._math_composites import cross as _cross
    return _cross(input, other, dim=dim)


def vecdot(x, y, *, dim=-1):
    """The dot product of x and y along dim (broadcasting the others)."""
    return (x * y).sum([dim])
