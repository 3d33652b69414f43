"""torch.linalg's routines for general matrices: least squares, the LU family, eig/eigvals and
the matrix exponential, on numpy (kiln/_lapack.py's
conventions: float32/float64, batched over broadcast leading dims, gradients by torch's
formulas in kiln ops, a graph break under kiln.compile).

- lstsq: the minimum-norm solution from an SVD (LAPACK's gelsd, numpy.linalg.lstsq's route),
  for every driver; what each driver returns beside it (residuals, rank, singular values) and
  their shapes are torch's. For a rank-deficient A, gelsy's rank comes from the same singular
  value cut-off (eps * max(m, n) unless rcond) rather than from a pivoted QR's estimate.
  Gradient: torch's linalg_lstsq_backward (through the pseudo-inverse).
- lu_factor / lu / lu_solve: Gaussian elimination with partial pivoting (getrf's choice: the
  first largest magnitude in the column), pivots as LAPACK's 1-based int32 row swaps.
- matrix_exp: scaling and squaring of a degree-13 Pade approximant (Higham 2005, as scipy's
  expm); gradient: the upper right block of exp([[A^T, G], [0, A^T]]) (torch's formula).
- eig / eigvals: LAPACK's geev through numpy.linalg.eig (torch's routine: the same order and
  unit-norm eigenvectors), always complex as torch's; not differentiable here (backward raises).
"""
import collections

import numpy as np

from . import _C
from ._lapack import _check, _mT, _np, _short, _sum_to, _t, pinv, solve, solve_triangular
from .autograd.function import Function

LstsqResult = collections.namedtuple("torch_return_types_linalg_lstsq",
                                     ["solution", "residuals", "rank", "singular_values"])
LUFactorResult = collections.namedtuple("torch_return_types_linalg_lu_factor", ["LU", "pivots"])
LUResult = collections.namedtuple("torch_return_types_linalg_lu", ["P", "L", "U"])

_DRIVERS = ("gels", "gelsy", "gelsd", "gelss")


def _from_numpy(a, dtype=None):
    from . import from_numpy
    return from_numpy(np.array(a, dtype=dtype, order="C"))  # a copy: 0-d stays 0-d


def _pinv_backward(g, pinvA, A):
    """torch's pinv_backward (real case): the gradient of pinv(A) given g = d/d pinv(A)."""
    m, n = A.shape[-2], A.shape[-1]
    pinvAh, gh = _mT(pinvA), _mT(g)
    if m <= n:
        K = gh @ pinvA
        KpinvAh = K @ pinvAh
        return -_mT(pinvA @ K) + KpinvAh - (A @ pinvA) @ KpinvAh + (pinvAh @ pinvA) @ (gh - K @ A)
    K = pinvA @ gh
    pinvAhK = pinvAh @ K
    return -_mT(K @ pinvA) + (gh - A @ K) @ pinvA @ pinvAh + pinvAhK - pinvAhK @ pinvA @ A


class _Lstsq(Function):
    @staticmethod
    def forward(ctx, A, B, rcond, vector):
        a, b = _np(A), _np(B)
        if vector:
            b = b[..., None]
        m, n = a.shape[-2:]
        if rcond is None:
            rcond = np.finfo(a.dtype).eps * max(m, n)
        # One SVD per matrix of A (rank and singular values have A's batch shape, as torch's);
        # the products broadcast it against B's.
        u, s, vh = np.linalg.svd(a, full_matrices=False)
        smax = s.max(axis=-1, keepdims=True) if s.size else np.zeros(a.shape[:-2] + (1,), a.dtype)
        keep = s > rcond * smax
        sinv = np.where(keep, 1.0 / np.where(keep, s, 1.0), 0.0).astype(a.dtype)
        x = np.swapaxes(vh, -1, -2) @ (sinv[..., :, None] * (np.swapaxes(u, -1, -2) @ b))
        ctx.vector, ctx.a_shape, ctx.b_shape = vector, tuple(A.shape), tuple(B.shape)
        ctx.save_for_backward(A, B)
        X = _t(x[..., 0] if vector else x, A.dtype)
        return X, _t(s, A.dtype), _from_numpy(keep.sum(-1).astype(np.int64)), _t(((a @ x - b) ** 2).sum(-2), A.dtype)

    @staticmethod
    def backward(ctx, gX, gs, grank, gres):
        A, B = ctx.saved_tensors
        if gX is None:
            return None, None, None, None
        if ctx.vector:
            gX, B = gX.unsqueeze(-1), B.unsqueeze(-1)
        pinvA = pinv(A.detach())
        gA = _pinv_backward(gX @ _mT(B), pinvA, A) if ctx.needs_input_grad[0] else None
        gB = _mT(pinvA) @ gX if ctx.needs_input_grad[1] else None
        if gB is not None and ctx.vector:
            gB = gB.squeeze(-1)
        return (None if gA is None else _sum_to(gA, ctx.a_shape),
                None if gB is None else _sum_to(gB, ctx.b_shape), None, None)


def lstsq(A, B, rcond=None, *, driver=None):
    _check("lstsq", A, square=False, name="input")
    if not isinstance(B, _C.TensorBase):
        raise TypeError(f"linalg.lstsq(): argument 'b' must be Tensor, not {type(B).__name__}")
    if B.dtype != A.dtype:
        raise RuntimeError(f"torch.linalg.lstsq: Expected input and other to have the same dtype, but got input's "
                           f"dtype {_short(A.dtype)} and other's dtype {_short(B.dtype)}")
    if driver is not None and driver not in _DRIVERS:
        raise RuntimeError("torch.linalg.lstsq: parameter `driver` should be one of (gels, gelsy, gelsd, gelss)")
    driver = driver or "gelsy"
    if not 0 <= A.dim() - B.dim() <= 1:
        raise RuntimeError("torch.linalg.lstsq: input.dim() must be greater or equal to other.dim() and "
                           "(input.dim() - other.dim()) <= 1")
    vector = B.dim() == A.dim() - 1
    b_shape = tuple(B.shape) + ((1,) if vector else ())
    a_batch, b_batch = tuple(A.shape[:-2]), b_shape[:-2]
    for i in range(1, min(len(a_batch), len(b_batch)) + 1):
        if a_batch[-i] != b_batch[-i] and a_batch[-i] != 1 and b_batch[-i] != 1:
            dim = max(len(a_batch), len(b_batch)) - i
            raise RuntimeError(f"The size of tensor a ({a_batch[-i]}) must match the size of tensor b ({b_batch[-i]}) "
                               f"at non-singleton dimension {dim}")
    if b_shape[-2] != A.shape[-2]:
        raise RuntimeError("torch.linalg.lstsq: input.size(-2) should match other.size(-2)")
    X, s, rank, residuals = _Lstsq.apply(A, B, rcond, vector)
    m, n = A.shape[-2], A.shape[-1]
    empty = _C._ops.empty([0], dtype=A.dtype)
    full_rank = bool((rank == min(m, n)).all())
    residuals = residuals.detach() if m > n and driver != "gelsy" and full_rank else empty
    rank = _C._ops.empty([0], dtype=_C.int64) if driver == "gels" else rank
    s = s.detach() if driver in ("gelsd", "gelss") else empty
    return LstsqResult(X, residuals, rank, s)


# --------------------------------------------------------------------------- LU
def _getrf(a):
    """Batched LU with partial pivoting of a [..., m, n] (a copy): (LU, 1-based pivots int32, info)."""
    lu = np.array(a, copy=True)
    m, n = lu.shape[-2:]
    k = min(m, n)
    batch = lu.shape[:-2]
    flat = lu.reshape(-1, m, n)
    piv = np.zeros((flat.shape[0], k), dtype=np.int32)
    info = np.zeros(flat.shape[0], dtype=np.int32)
    rows = np.arange(flat.shape[0])
    for j in range(k):
        p = j + np.argmax(np.abs(flat[:, j:, j]), axis=1)
        piv[:, j] = p + 1
        swap = flat[rows, p, :].copy()
        flat[rows, p, :] = flat[:, j, :]
        flat[:, j, :] = swap
        pivot = flat[:, j, j]
        zero = pivot == 0
        info[(info == 0) & zero] = j + 1
        scale = np.where(zero, 0.0, 1.0 / np.where(zero, 1.0, pivot)).astype(flat.dtype)
        flat[:, j + 1:, j] *= scale[:, None]
        flat[:, j + 1:, j + 1:] -= flat[:, j + 1:, j:j + 1] * flat[:, j:j + 1, j + 1:]
    return flat.reshape(lu.shape), piv.reshape(batch + (k,)), info.reshape(batch)


def _permutation(piv, m, dtype):
    """P with A = P L U from LAPACK pivots (row i swapped with piv[i] - 1, in order)."""
    batch = piv.shape[:-1]
    perm = np.broadcast_to(np.arange(m), batch + (m,)).copy().reshape(-1, m)
    flat = piv.reshape(-1, piv.shape[-1])
    rows = np.arange(perm.shape[0])
    for j in range(flat.shape[1]):
        p = flat[:, j] - 1
        tmp = perm[rows, j].copy()
        perm[rows, j] = perm[rows, p]
        perm[rows, p] = tmp
    # perm[i] is the original row now at position i: P^T A = L U, P[perm[i], i] = 1.
    P = np.zeros((perm.shape[0], m, m), dtype=dtype)
    P[rows[:, None], perm, np.arange(m)[None, :]] = 1
    return P.reshape(batch + (m, m))


class _LU(Function):
    @staticmethod
    def forward(ctx, A, pivot):
        a = _np(A)
        m, n = a.shape[-2:]
        lu, piv, _ = _getrf(a)
        k = min(m, n)
        L = np.tril(lu[..., :, :k], -1) + np.eye(m, k, dtype=a.dtype)
        U = np.triu(lu[..., :k, :])
        P = _permutation(piv, m, a.dtype)
        Pt, Lt, Ut = _t(P, A.dtype), _t(L, A.dtype), _t(U, A.dtype)
        ctx.save_for_backward(Pt, Lt, Ut)
        ctx.mark_non_differentiable(Pt)
        return Pt, Lt, Ut

    @staticmethod
    def backward(ctx, gP, gL, gU):
        # torch's linalg_lu_backward for square A: P L^-H (L^H gL o tril(-1) + gU U^H o triu) U^-H.
        P, L, U = ctx.saved_tensors
        if L.shape[-1] != L.shape[-2] or U.shape[-1] != U.shape[-2]:
            raise NotImplementedError("linalg.lu: the gradient of a non-square factorization is not implemented "
                                      "in kiln")
        if gL is None and gU is None:
            return None, None
        phi = None if gL is None else (_mT(L) @ gL).tril(-1)
        if gU is not None:
            phi = (gU @ _mT(U)).triu() if phi is None else phi + (gU @ _mT(U)).triu()
        grad = solve_triangular(_mT(U), phi, upper=False, left=False)
        grad = solve_triangular(_mT(L), grad, upper=True, unitriangular=True)
        return P @ grad, None


def _lu_checks(op, A, pivot):
    _check(op, A, square=False)
    if not pivot:
        raise RuntimeError(f"linalg.{op}: LU without pivoting is not implemented on the CPU")


def lu_factor(A, *, pivot=True):
    _lu_checks("lu_factor", A, pivot)
    lu, piv, _ = _getrf(_np(A))
    if A.requires_grad:
        raise NotImplementedError("linalg.lu_factor: the derivative is not implemented in kiln (linalg.lu has one)")
    return LUFactorResult(_t(lu, A.dtype), _from_numpy(piv))


def lu_factor_ex(A, *, pivot=True, check_errors=False):
    _lu_checks("lu_factor_ex", A, pivot)
    lu, piv, info = _getrf(_np(A))
    return collections.namedtuple("torch_return_types_linalg_lu_factor_ex", ["LU", "pivots", "info"])(
        _t(lu, A.dtype), _from_numpy(piv), _from_numpy(info))


def lu(A, *, pivot=True):
    _lu_checks("lu", A, pivot)
    P, L, U = _LU.apply(A, pivot)
    return LUResult(P.detach(), L, U)


def lu_solve(LU, pivots, B, *, left=True, adjoint=False):
    """X with A X = B (X A = B when left=False; A^H in place of A when adjoint) from A's LU."""
    _check("lu_solve", LU)
    m = LU.shape[-1]
    if not isinstance(pivots, _C.TensorBase) or pivots.dtype != _C.int32:
        raise RuntimeError("linalg.lu_solve: pivots should be a Tensor of dtype int32")
    P = _t(_permutation(np.ascontiguousarray(pivots.numpy()), m, _np(LU).dtype), LU.dtype)
    A = P @ (LU.tril(-1) + _C._ops.eye(m, dtype=LU.dtype)) @ LU.triu()
    return solve(_mT(A) if adjoint else A, B, left=left)


# --------------------------------------------------------------------------- matrix exponential
_PADE13 = (64764752532480000., 32382376266240000., 7771770303897600., 1187353796428800., 129060195264000.,
           10559470521600., 670442572800., 33522128640., 1323241920., 40840800., 960960., 16380., 182., 1.)
_THETA13 = 5.371920351148152


def _expm(a):
    """exp of a batch of square matrices (float64 arithmetic)."""
    a = a.astype(np.float64)
    n = a.shape[-1]
    norms = np.abs(a).sum(-2).max(-1) if a.size else np.zeros(a.shape[:-2])
    s = np.maximum(0, np.ceil(np.log2(np.maximum(norms, 1e-300) / _THETA13))).astype(int)
    out = np.empty_like(a)
    flat, sflat, oflat = a.reshape(-1, n, n), s.reshape(-1), out.reshape(-1, n, n)
    eye = np.eye(n)
    b = _PADE13
    for i in range(flat.shape[0]):
        x = flat[i] / 2.0 ** sflat[i]
        x2 = x @ x
        x4 = x2 @ x2
        x6 = x4 @ x2
        u = x @ (x6 @ (b[13] * x6 + b[11] * x4 + b[9] * x2) + b[7] * x6 + b[5] * x4 + b[3] * x2 + b[1] * eye)
        v = x6 @ (b[12] * x6 + b[10] * x4 + b[8] * x2) + b[6] * x6 + b[4] * x4 + b[2] * x2 + b[0] * eye
        r = np.linalg.solve(v - u, v + u)
        for _ in range(sflat[i]):
            r = r @ r
        oflat[i] = r
    return out


class _MatrixExp(Function):
    @staticmethod
    def forward(ctx, A):
        ctx.save_for_backward(A)
        return _t(_expm(_np(A)), A.dtype)

    @staticmethod
    def backward(ctx, g):
        (A,) = ctx.saved_tensors
        n = A.shape[-1]
        At = _mT(A)
        top = _C._ops.cat([At, g], -1)
        bottom = _C._ops.cat([_C._ops.zeros_like(g), At], -1)
        return matrix_exp(_C._ops.cat([top, bottom], -2))[..., :n, n:]


def matrix_exp(A):
    if not isinstance(A, _C.TensorBase):
        raise TypeError(f"linalg.matrix_exp(): argument 'input' must be Tensor, not {type(A).__name__}")
    if A.dim() < 2 or A.shape[-1] != A.shape[-2]:
        raise RuntimeError("linalg.matrix_exp: The input tensor A must have at least 2 dimensions." if A.dim() < 2
                           else f"linalg.matrix_exp: A must be batches of square matrices, but they are "
                                f"{A.shape[-2]} by {A.shape[-1]} matrices")
    _check("matrix_exp", A)
    return _MatrixExp.apply(A)


# --------------------------------------------------------------------------- eig
EigResult = collections.namedtuple("torch_return_types_linalg_eig", ["eigenvalues", "eigenvectors"])


class _Eig(Function):
    @staticmethod
    def forward(ctx, A, vectors):
        complex_type = np.complex64 if A.dtype == _C.float32 else np.complex128
        a = _np(A)
        if vectors:
            w, v = np.linalg.eig(a)
            return _from_numpy(w, complex_type), _from_numpy(v, complex_type)
        w = np.linalg.eigvals(a)
        return _from_numpy(w, complex_type), _from_numpy(np.zeros((0,), complex_type))

    @staticmethod
    def backward(ctx, gw, gv):
        raise NotImplementedError("linalg.eig: the derivative is not implemented in kiln")


def eig(A, *, out=None):
    _check("eig", A)
    w, v = _Eig.apply(A, True)
    return EigResult(w, v)


def eigvals(A, *, out=None):
    _check("eigvals", A)
    return _Eig.apply(A, False)[0]
