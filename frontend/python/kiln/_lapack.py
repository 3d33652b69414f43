"""Dense linear algebra (torch.linalg's factorizations and solves) on LAPACK through numpy.linalg:
inv, det, slogdet, logdet, solve, solve_triangular, cholesky, cholesky_solve, qr, eigh, eigvalsh,
svd, svdvals, pinv, matrix_rank.

Eagerly, each runs numpy's LAPACK routine (getrf/gesv, potrf, geqrf, syevd, gesdd: the ones
PyTorch calls) on the tensor's memory, batched over leading dims, in float32 or float64, and
wraps the result. Gradients come from kiln.autograd.Function nodes whose backward formulas are
written in kiln ops (PyTorch's formulas), so second derivatives work where the formula's ops
have them. Not differentiable here (their backward raises): QR, the eigenvectors of eigh, the
singular vectors of svd, pinv. Under kiln.compile a call is a graph break (its value is
computed on the data: see docs/nn.md)."""
import collections

import numpy as np

from . import _C
from .autograd.function import Function


class LinAlgError(RuntimeError):
    """torch.linalg.LinAlgError: a matrix that cannot be factorized (singular, not positive-definite)."""


EighResult = collections.namedtuple("torch_return_types_linalg_eigh", ["eigenvalues", "eigenvectors"])
SlogdetResult = collections.namedtuple("torch_return_types_linalg_slogdet", ["sign", "logabsdet"])
QRResult = collections.namedtuple("torch_return_types_linalg_qr", ["Q", "R"])
SVDResult = collections.namedtuple("torch_return_types_linalg_svd", ["U", "S", "Vh"])


def _check(op, A, square=True, name="A"):
    if not isinstance(A, _C.TensorBase):
        raise TypeError(f"linalg.{op}(): argument '{name}' must be Tensor, not {type(A).__name__}")
    if A.dim() < 2:
        raise RuntimeError(f"linalg.{op}: The input tensor {name} must have at least 2 dimensions.")
    if square and A.shape[-1] != A.shape[-2]:
        raise RuntimeError(f"linalg.{op}: {name} must be batches of square matrices, but they are "
                           f"{A.shape[-2]} by {A.shape[-1]} matrices")
    if A.dtype not in (_C.float32, _C.float64):
        if A.dtype in (_C.float16, _C.bfloat16):
            raise RuntimeError(f"linalg.{op}: Low precision dtypes not supported. Got {_short(A.dtype)}")
        raise RuntimeError(f"linalg.{op}: Expected a floating point or complex tensor as input. Got {_short(A.dtype)}")
    if A.device.type == "meta":  # a traced value: LAPACK needs the data
        raise NotImplementedError(f"linalg.{op} runs LAPACK (through numpy) on the data, which kiln.compile "
                                  "cannot trace: a graph break")
    if A.device.type != "cpu":
        raise RuntimeError(f"linalg.{op}: kiln computes it on the CPU only (got a tensor on {A.device})")


def _short(dtype):
    return {"float16": "Half", "bfloat16": "BFloat16", "int64": "Long", "int32": "Int", "bool": "Bool",
            "uint8": "Byte", "int8": "Char", "int16": "Short", "float32": "Float", "float64": "Double"}.get(str(dtype).split(".")[-1], str(dtype))


def _np(t):
    return t.detach().contiguous().numpy()


def _t(a, dtype):
    from . import from_numpy
    a = np.array(a, dtype=np.float32 if dtype == _C.float32 else np.float64, order="C")  # a copy: 0-d stays 0-d
    return from_numpy(a)


def _mT(x):
    return x.transpose(-2, -1)


def _lapack(op, fn, *arrays, what):
    try:
        with np.errstate(all="ignore"):
            return fn(*arrays)
    except np.linalg.LinAlgError as e:
        raise LinAlgError(f"linalg.{op}: {what} ({e})") from None


# --------------------------------------------------------------------------- inverse and solves
class _Inv(Function):
    @staticmethod
    def forward(ctx, A):
        out = _t(_lapack("inv", np.linalg.inv, _np(A), what="The input matrix is singular, the inversion could "
                         "not be completed"), A.dtype)
        ctx.save_for_backward(out)
        return out

    @staticmethod
    def backward(ctx, g):
        (Ainv,) = ctx.saved_tensors
        return -(_mT(Ainv) @ g @ _mT(Ainv))


def inv(A, *, out=None):
    _check("inv", A)
    return _Inv.apply(A)


def _is_vector_rhs(A, B):
    return B.dim() == 1 or (B.dim() == A.dim() - 1 and tuple(B.shape) == tuple(A.shape[:-1]))


def _sum_to(g, shape):
    """A broadcast batch gradient summed back to an input's shape."""
    shape = tuple(shape)
    while g.dim() > len(shape):
        g = g.sum(0)
    dims = [i for i, (a, b) in enumerate(zip(g.shape, shape)) if b == 1 and a != 1]
    return g.sum(dims, keepdim=True) if dims else g


class _Solve(Function):
    @staticmethod
    def forward(ctx, A, B):
        a, b = _np(A), _np(B)
        vector = _is_vector_rhs(A, B)
        if vector:
            b = b[..., None]
        batch = np.broadcast_shapes(a.shape[:-2], b.shape[:-2])
        x = _lapack("solve", np.linalg.solve, np.broadcast_to(a, batch + a.shape[-2:]),
                    np.broadcast_to(b, batch + b.shape[-2:]),
                    what="The solver failed because the input matrix is singular.")
        X = _t(x[..., 0] if vector else x, A.dtype)
        ctx.vector, ctx.a_shape, ctx.b_shape = vector, tuple(A.shape), tuple(B.shape)
        ctx.save_for_backward(A, X)
        return X

    @staticmethod
    def backward(ctx, g):
        A, X = ctx.saved_tensors
        gB = solve(_mT(A), g)
        gA = -(gB.unsqueeze(-1) @ X.unsqueeze(-2)) if ctx.vector else -(gB @ _mT(X))
        return _sum_to(gA, ctx.a_shape), _sum_to(gB, ctx.b_shape)


def solve(A, B, *, left=True, out=None):
    _check("solve", A)
    if not isinstance(B, _C.TensorBase):
        raise TypeError(f"linalg.solve(): argument 'B' must be Tensor, not {type(B).__name__}")
    if B.dtype != A.dtype:
        raise RuntimeError(f"linalg.solve: Expected A and B to have the same dtype, but found A of type "
                           f"{_short(A.dtype)} and B of type {_short(B.dtype)} instead")
    if not left:  # X A = B  <=>  A^T X^T = B^T
        return _mT(solve(_mT(A), _mT(B)))
    n = A.shape[-1]
    rows = B.shape[-1] if _is_vector_rhs(A, B) else B.shape[-2]
    if rows != n:
        raise RuntimeError(f"linalg.solve: Incompatible shapes of A and B for the equation AX = B "
                           f"({A.shape[-2]}x{A.shape[-1]} and {B.shape[-2] if B.dim() > 1 else B.shape[-1]}x"
                           f"{B.shape[-1] if B.dim() > 1 else 1})")
    return _Solve.apply(A, B)


def solve_triangular(A, B, *, upper, left=True, unitriangular=False, out=None):
    """X with A X = B (X A = B when left=False) for triangular A: built from the triangle of A
    (and a unit diagonal) and solved; differentiable through solve."""
    _check("solve_triangular", A)
    from . import eye
    T = A.triu() if upper else A.tril()
    if unitriangular:
        n = A.shape[-1]
        I = eye(n, dtype=A.dtype)
        T = T - T * I + I
    return solve(T, B, left=left)


# --------------------------------------------------------------------------- determinants
class _Slogdet(Function):
    @staticmethod
    def forward(ctx, A):
        sign, logabs = _lapack("slogdet", np.linalg.slogdet, _np(A), what="failed")
        ctx.save_for_backward(A)
        sign = _t(sign, A.dtype)
        ctx.mark_non_differentiable(sign)
        return sign, _t(logabs, A.dtype)

    @staticmethod
    def backward(ctx, gsign, glogabs):
        (A,) = ctx.saved_tensors
        if glogabs is None:
            return None
        return glogabs.unsqueeze(-1).unsqueeze(-1) * _mT(inv(A))


def slogdet(A, *, out=None):
    _check("slogdet", A)
    sign, logabs = _Slogdet.apply(A)
    return SlogdetResult(sign.detach(), logabs)


class _Det(Function):
    @staticmethod
    def forward(ctx, A):
        d = _t(_lapack("det", np.linalg.det, _np(A), what="failed"), A.dtype)
        ctx.save_for_backward(A, d)
        return d

    @staticmethod
    def backward(ctx, g):
        A, d = ctx.saved_tensors
        if bool((d == 0).any()):
            raise RuntimeError("linalg.det: the gradient at a singular matrix is not implemented in kiln")
        return (g * d).unsqueeze(-1).unsqueeze(-1) * _mT(inv(A))


def det(A, *, out=None):
    _check("det", A)
    return _Det.apply(A)


def logdet(A):
    """log(det(A)): nan where det < 0, -inf where det == 0 (torch.logdet)."""
    _check("logdet", A)
    sign, logabs = _Slogdet.apply(A)
    from . import where, full_like
    return where(sign < 0, full_like(logabs, float("nan")), logabs)


# --------------------------------------------------------------------------- factorizations
class _Cholesky(Function):
    @staticmethod
    def forward(ctx, A):
        L = _t(_lapack("cholesky", np.linalg.cholesky, _np(A),
                       what="The factorization could not be completed because the input is not positive-definite"),
               A.dtype)
        ctx.save_for_backward(L)
        return L

    @staticmethod
    def backward(ctx, gL):
        # A = L L^T: gA = sym(L^-T Phi(L^T gL) L^-1), Phi = lower triangle with half the diagonal.
        (L,) = ctx.saved_tensors
        from . import eye
        n = L.shape[-1]
        P = (_mT(L) @ gL).tril()
        P = P - 0.5 * P * eye(n, dtype=L.dtype)
        Linv = inv(L)
        S = _mT(Linv) @ P @ Linv
        return 0.5 * (S + _mT(S))


def cholesky(A, *, upper=False, out=None):
    _check("cholesky", A)
    L = _Cholesky.apply(A)
    return _mT(L) if upper else L


def cholesky_solve(B, L, upper=False):
    """X with A X = B for A = L L^T (L^T L when upper)."""
    A = _mT(L) @ L if upper else L @ _mT(L)
    return solve(A, B)


class _QR(Function):
    @staticmethod
    def forward(ctx, A, mode):
        q, r = _lapack("qr", np.linalg.qr, _np(A), mode if mode != "r" else "reduced", what="failed")
        return _t(q, A.dtype), _t(r, A.dtype)

    @staticmethod
    def backward(ctx, gQ, gR):
        raise NotImplementedError("linalg.qr: the derivative of QR is not implemented in kiln")


def qr(A, mode="reduced", *, out=None):
    _check("qr", A, square=False)
    if mode not in ("reduced", "complete", "r"):
        raise RuntimeError(f"qr received unrecognized mode '{mode}' but expected one of 'reduced' (default), 'r', "
                           "or 'complete'")
    Q, R = _QR.apply(A, mode)
    if mode == "r":
        from . import empty
        return QRResult(empty(0, dtype=A.dtype), R)
    return QRResult(Q, R)


class _Eigh(Function):
    @staticmethod
    def forward(ctx, A, uplo):
        w, v = _lapack("eigh", np.linalg.eigh, _np(A), uplo, what="The algorithm failed to converge")
        W, V = _t(w, A.dtype), _t(v, A.dtype)
        ctx.save_for_backward(V)
        return W, V

    @staticmethod
    def backward(ctx, gW, gV):
        (V,) = ctx.saved_tensors
        if gV is not None and bool((gV != 0).any()):
            raise NotImplementedError("linalg.eigh: the derivative through the eigenvectors is not implemented in "
                                      "kiln (the eigenvalues' is: use linalg.eigvalsh)")
        if gW is None:
            return None, None
        return (V * gW.unsqueeze(-2)) @ _mT(V), None


def eigh(A, UPLO="L", *, out=None):
    _check("eigh", A)
    if UPLO not in ("L", "U"):
        raise RuntimeError(f"Expected UPLO argument to be 'L' or 'U', but got {UPLO}")
    W, V = _Eigh.apply(A, UPLO)
    return EighResult(W, V)


def eigvalsh(A, UPLO="L", *, out=None):
    return eigh(A, UPLO).eigenvalues


class _SVD(Function):
    @staticmethod
    def forward(ctx, A, full_matrices):
        u, s, vh = _lapack("svd", np.linalg.svd, _np(A), full_matrices, what="The algorithm failed to converge")
        U, S, Vh = _t(u, A.dtype), _t(s, A.dtype), _t(vh, A.dtype)
        k = S.shape[-1]
        ctx.save_for_backward(U[..., :k], Vh[..., :k, :])
        return U, S, Vh

    @staticmethod
    def backward(ctx, gU, gS, gVh):
        U, Vh = ctx.saved_tensors
        if any(g is not None and bool((g != 0).any()) for g in (gU, gVh)):
            raise NotImplementedError("linalg.svd: the derivative through the singular vectors is not implemented "
                                      "in kiln (the singular values' is: use linalg.svdvals)")
        if gS is None:
            return None, None
        return (U * gS.unsqueeze(-2)) @ Vh, None


def svd(A, full_matrices=True, *, driver=None, out=None):
    _check("svd", A, square=False)
    U, S, Vh = _SVD.apply(A, full_matrices)
    return SVDResult(U, S, Vh)


def svdvals(A, *, driver=None, out=None):
    _check("svdvals", A, square=False)
    return _SVD.apply(A, False)[1]


def _rank_tolerance(s, shape, atol, rtol):
    """torch's cut-off for singular values s: max(atol, rtol * largest), rtol defaulting to
    eps * max(m, n) when atol is not given."""
    smax = s.max(axis=-1, keepdims=True) if s.size else np.zeros(s.shape[:-1] + (1,), dtype=s.dtype)
    if rtol is None:
        rtol = np.finfo(s.dtype).eps * max(shape[-2:]) if atol is None or atol == 0 else 0.0
    return np.maximum(0.0 if atol is None else atol, rtol * smax)


def pinv(A, *, atol=None, rtol=None, hermitian=False, out=None):
    """The Moore-Penrose pseudo-inverse (not differentiable here)."""
    _check("pinv", A, square=False)
    a = _np(A)
    u, s, vh = np.linalg.svd(a, full_matrices=False)
    tol = _rank_tolerance(s, a.shape, atol, rtol)
    sinv = np.where(s > tol, 1.0 / np.where(s > tol, s, 1.0), 0.0).astype(a.dtype)
    out = np.swapaxes(vh, -1, -2) @ (sinv[..., :, None] * np.swapaxes(u, -1, -2))
    if A.requires_grad:
        raise NotImplementedError("linalg.pinv: the derivative is not implemented in kiln")
    return _t(out, A.dtype)


def matrix_rank(A, *, atol=None, rtol=None, hermitian=False, out=None):
    _check("matrix_rank", A, square=False)
    s = np.linalg.svd(_np(A), compute_uv=False)
    tol = _rank_tolerance(s, tuple(A.shape), atol, rtol)
    from . import from_numpy
    return from_numpy(np.array((s > tol).sum(-1), dtype=np.int64))


# --------------------------------------------------------------------------- torch.* spellings
def _cholesky_legacy(A, upper=False):
    return cholesky(A, upper=upper)


def _svd_legacy(A, some=True, compute_uv=True):
    """torch.svd: (U, S, V) with V (not V^H), reduced unless some=False."""
    U, S, Vh = svd(A, full_matrices=not some)
    return collections.namedtuple("torch_return_types_svd", ["U", "S", "V"])(U, S, _mT(Vh))


def _qr_legacy(A, some=True):
    return qr(A, "reduced" if some else "complete")


def _pinverse(A, rcond=1e-15):
    return pinv(A, rtol=rcond)


TOP_LEVEL = {"det": det, "inverse": inv, "logdet": logdet, "slogdet": slogdet, "cholesky": _cholesky_legacy,
             "cholesky_solve": cholesky_solve, "pinverse": _pinverse, "svd": _svd_legacy, "qr": _qr_legacy,
             "cholesky_inverse": lambda L, upper=False: inv(_mT(L) @ L if upper else L @ _mT(L))}


def install(namespace, tensor_class):
    from ._lapack_general import matrix_exp

    for name, fn in dict(TOP_LEVEL, matrix_exp=matrix_exp).items():
        namespace[name] = fn
        setattr(tensor_class, name, fn)
