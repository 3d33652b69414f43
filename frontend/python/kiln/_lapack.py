"""Dense linear algebra (torch.linalg's factorizations and solves): inv, inv_ex, det, slogdet,
logdet, solve, solve_triangular, cholesky, cholesky_ex, cholesky_solve, qr, eigh, eigvalsh, svd,
svdvals, pinv, matrix_rank.

Each is an op of the table (ir/ops/linalg.yaml: `linalg_cholesky_ex`, `linalg_solve`, ...) whose
CPU kernel calls LAPACK (runtime/cpu/LinalgKernels.cpp) and whose meta function gives the result
shapes, so kiln.compile captures a call as a graph node (run by the compiled program as a fallback
kernel) and AOT autograd differentiates it with PyTorch's formulas
(runtime/autograd/LinalgFormulas.cpp). A matrix that cannot be factorized raises LinAlgError, in
eager and compiled code alike. cholesky_solve, logdet, pinv and matrix_rank are written in those
ops. The numpy helpers at the end serve kiln/_lapack_general.py (lstsq, lu, eig, matrix_exp:
still on numpy, a graph break under kiln.compile)."""
import collections

import numpy as np

from . import _C

LinAlgError = _C.LinAlgError
LinAlgError.__module__ = "kiln.linalg"

_ops = _C._ops

EighResult = collections.namedtuple("torch_return_types_linalg_eigh", ["eigenvalues", "eigenvectors"])
SlogdetResult = collections.namedtuple("torch_return_types_linalg_slogdet", ["sign", "logabsdet"])
QRResult = collections.namedtuple("torch_return_types_linalg_qr", ["Q", "R"])
SVDResult = collections.namedtuple("torch_return_types_linalg_svd", ["U", "S", "Vh"])
InvExResult = collections.namedtuple("torch_return_types_linalg_inv_ex", ["inverse", "info"])
CholeskyExResult = collections.namedtuple("torch_return_types_linalg_cholesky_ex", ["L", "info"])


def _short(dtype):
    return {"float16": "Half", "bfloat16": "BFloat16", "int64": "Long", "int32": "Int", "bool": "Bool",
            "uint8": "Byte", "int8": "Char", "int16": "Short", "float32": "Float", "float64": "Double"}.get(str(dtype).split(".")[-1], str(dtype))


def _mT(x):
    return x.transpose(-2, -1)


def _tensor_arg(op, x, name):
    if not isinstance(x, _C.TensorBase):
        raise TypeError(f"linalg.{op}(): argument '{name}' must be Tensor, not {type(x).__name__}")


def _write_out(op, out, results, inputs):
    """torch's out= convention: the results copied into the given tensors (resized to them), which
    are returned; not differentiable."""
    if out is None:
        return results
    single = not isinstance(results, tuple)
    outs = (out,) if single and isinstance(out, _C.TensorBase) else tuple(out) if isinstance(out, (tuple, list)) else None
    values = (results,) if single else tuple(results)
    if outs is None or len(outs) != len(values) or not all(isinstance(o, _C.TensorBase) for o in outs):
        raise TypeError(f"linalg.{op}(): argument 'out' must be {'Tensor' if single else f'a tuple of {len(values)} Tensors'}")
    if _C.is_grad_enabled() and any(isinstance(t, _C.TensorBase) and t.requires_grad for t in inputs):
        raise RuntimeError(f"linalg_{op}(): functions with out=... arguments don't support automatic "
                           "differentiation, but one of the arguments requires grad.")
    for o, v in zip(outs, values):
        if o.dtype != v.dtype:
            raise RuntimeError(f"linalg.{op}: Expected out tensor to have dtype {v.dtype}, but got {o.dtype} instead")
        if tuple(o.shape) != tuple(v.shape):  # resized to the result, as torch's out= (set_data)
            o.data = v.detach().clone()
        else:
            o.copy_(v)
    return out if single else type(results)(*outs) if hasattr(results, "_fields") else tuple(outs)


# --------------------------------------------------------------------------- inverse and solves
def inv(A, *, out=None):
    _tensor_arg("inv", A, "A")
    return _write_out("inv", out, _ops.linalg_inv_ex(A, check_errors=True)[0], (A,))


def inv_ex(A, *, check_errors=False, out=None):
    _tensor_arg("inv_ex", A, "A")
    return _write_out("inv_ex", out, InvExResult(*_ops.linalg_inv_ex(A, check_errors=check_errors)), (A,))


def solve(A, B, *, left=True, out=None):
    _tensor_arg("solve", A, "A")
    _tensor_arg("solve", B, "B")
    return _write_out("solve", out, _ops.linalg_solve(A, B, left=left), (A, B))


def solve_triangular(A, B, *, upper, left=True, unitriangular=False, out=None):
    """X with A X = B (X A = B when left=False), reading only A's upper or lower triangle (and
    taking its diagonal as ones when unitriangular)."""
    _tensor_arg("solve_triangular", A, "input")
    _tensor_arg("solve_triangular", B, "B")
    X = _ops.linalg_solve_triangular(A, B, upper=upper, left=left, unitriangular=unitriangular)
    return _write_out("solve_triangular", out, X, (A, B))


# --------------------------------------------------------------------------- determinants
def slogdet(A, *, out=None):
    _tensor_arg("slogdet", A, "A")
    sign, logabs = _ops.linalg_slogdet(A)
    return _write_out("slogdet", out, SlogdetResult(sign.detach(), logabs), (A,))


def det(A, *, out=None):
    _tensor_arg("det", A, "A")
    return _write_out("det", out, _ops.linalg_det(A), (A,))


def logdet(A):
    """log(det(A)): nan where det < 0, -inf where det == 0 (torch.logdet)."""
    _tensor_arg("logdet", A, "input")
    sign, logabs = _ops.linalg_slogdet(A)
    return _ops.where(sign < 0, _ops.full_like(logabs, float("nan")), logabs)


# --------------------------------------------------------------------------- factorizations
def cholesky(A, *, upper=False, out=None):
    _tensor_arg("cholesky", A, "A")
    return _write_out("cholesky", out, _ops.linalg_cholesky_ex(A, upper=upper, check_errors=True)[0], (A,))


def cholesky_ex(A, *, upper=False, check_errors=False, out=None):
    _tensor_arg("cholesky_ex", A, "A")
    L, info = _ops.linalg_cholesky_ex(A, upper=upper, check_errors=check_errors)
    return _write_out("cholesky_ex", out, CholeskyExResult(L, info), (A,))


def cholesky_solve(B, L, upper=False, *, out=None):
    """X with A X = B for A = L L^T (U^T U when upper): two triangular solves."""
    _tensor_arg("cholesky_solve", B, "input")
    _tensor_arg("cholesky_solve", L, "input2")
    if upper:
        X = solve_triangular(L, solve_triangular(_mT(L), B, upper=False), upper=True)
    else:
        X = solve_triangular(_mT(L), solve_triangular(L, B, upper=False), upper=True)
    return _write_out("cholesky_solve", out, X, (B, L))


def qr(A, mode="reduced", *, out=None):
    _tensor_arg("qr", A, "A")
    return _write_out("qr", out, QRResult(*_ops.linalg_qr(A, mode)), (A,))


def eigh(A, UPLO="L", *, out=None):
    _tensor_arg("eigh", A, "A")
    return _write_out("eigh", out, EighResult(*_ops.linalg_eigh(A, UPLO)), (A,))


def eigvalsh(A, UPLO="L", *, out=None):
    _tensor_arg("eigvalsh", A, "A")
    return _write_out("eigvalsh", out, _ops.linalg_eigvalsh(A, UPLO), (A,))


def svd(A, full_matrices=True, *, driver=None, out=None):
    _tensor_arg("svd", A, "A")
    return _write_out("svd", out, SVDResult(*_ops.linalg_svd(A, full_matrices, driver=driver)), (A,))


def svdvals(A, *, driver=None, out=None):
    _tensor_arg("svdvals", A, "A")
    return _write_out("svdvals", out, _ops.linalg_svdvals(A, driver=driver), (A,))


_EPS = {"float32": 1.1920928955078125e-07, "float64": 2.220446049250313e-16}


def _rank_tolerance(S, shape, dtype, atol, rtol):
    """torch's cut-off for the singular values S (descending): max(atol, rtol * largest), rtol
    defaulting to eps * max(m, n) unless atol > 0 is given. atol and rtol may be tensors."""
    smax = S.amax(-1, keepdim=True) if S.shape[-1] else _ops.zeros_like(S.sum(-1, keepdim=True))
    eps_rtol = _EPS.get(str(dtype).split(".")[-1], 0.0) * max(shape[-2:])
    if rtol is None:
        if atol is None:
            rtol = eps_rtol
        elif isinstance(atol, _C.TensorBase):
            rtol = _ops.where(atol > 0, _ops.zeros_like(atol), _ops.full_like(atol, eps_rtol))
        else:
            rtol = 0.0 if atol > 0 else eps_rtol
    if isinstance(rtol, _C.TensorBase) and rtol.dim() > 0:
        rtol = rtol.unsqueeze(-1)
    if isinstance(atol, _C.TensorBase) and atol.dim() > 0:
        atol = atol.unsqueeze(-1)
    tol = rtol * smax
    return tol if atol is None else _ops.maximum(tol, atol if isinstance(atol, _C.TensorBase) else _ops.full_like(tol, atol))


def _check_rank_input(op, A):
    _tensor_arg(op, A, "A")
    if A.dim() < 2:
        raise RuntimeError(f"linalg.{op}: The input tensor A must have at least 2 dimensions.")


def pinv(A, *, atol=None, rtol=None, hermitian=False, out=None):
    """The Moore-Penrose pseudo-inverse from the SVD (eigh when hermitian), singular values below
    the tolerance dropped; differentiable through the factorization's formula (A of full rank)."""
    _check_rank_input("pinv", A)
    if hermitian:
        L, V = _ops.linalg_eigh(A)
        keep = L.abs() > _rank_tolerance(L.abs(), tuple(A.shape), A.dtype, atol, rtol)
        Linv = _ops.where(keep, L.reciprocal(), _ops.zeros_like(L))
        return _write_out("pinv", out, (V * Linv.unsqueeze(-2)) @ _mT(V), (A,))
    U, S, Vh = _ops.linalg_svd(A, False)
    keep = S > _rank_tolerance(S, tuple(A.shape), A.dtype, atol, rtol)
    Sinv = _ops.where(keep, S.reciprocal(), _ops.zeros_like(S))
    return _write_out("pinv", out, (_mT(Vh) * Sinv.unsqueeze(-2)) @ _mT(U), (A,))


def matrix_rank(A, *, atol=None, rtol=None, hermitian=False, out=None):
    _check_rank_input("matrix_rank", A)
    S = _ops.linalg_eigvalsh(A).abs() if hermitian else _ops.linalg_svdvals(A)
    rank = (S > _rank_tolerance(S, tuple(A.shape), A.dtype, atol, rtol)).sum(-1)
    return _write_out("matrix_rank", out, rank, (A,))


# --------------------------------------------------------------------------- numpy helpers
# (for kiln/_lapack_general.py's routines, which still run numpy on the data)
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
    if A.device.type == "meta":  # a traced value: numpy needs the data
        raise NotImplementedError(f"linalg.{op} runs LAPACK (through numpy) on the data, which kiln.compile "
                                  "cannot trace: a graph break")
    if A.device.type != "cpu":
        raise RuntimeError(f"linalg.{op}: kiln computes it on the CPU only (got a tensor on {A.device})")


def _np(t):
    return t.detach().contiguous().numpy()


def _t(a, dtype):
    from . import from_numpy
    a = np.array(a, dtype=np.float32 if dtype == _C.float32 else np.float64, order="C")  # a copy: 0-d stays 0-d
    return from_numpy(a)


def _sum_to(g, shape):
    """A broadcast batch gradient summed back to an input's shape."""
    shape = tuple(shape)
    while g.dim() > len(shape):
        g = g.sum(0)
    dims = [i for i, (a, b) in enumerate(zip(g.shape, shape)) if b == 1 and a != 1]
    return g.sum(dims, keepdim=True) if dims else g


# --------------------------------------------------------------------------- torch.* spellings
def _cholesky_legacy(A, upper=False):
    return cholesky(A, upper=upper)


_LegacySVDResult = collections.namedtuple("torch_return_types_svd", ["U", "S", "V"])


def _svd_legacy(A, some=True, compute_uv=True):
    """torch.svd: (U, S, V) with V (not V^H), reduced unless some=False."""
    U, S, Vh = svd(A, full_matrices=not some)
    return _LegacySVDResult(U, S, _mT(Vh))


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
