"""kiln.linalg's factorizations and solves under kiln.compile (issue 16): ops of the table
(ir/ops/linalg.yaml) captured as graph nodes, not graph breaks; compiled values and gradients
equal eager kiln's and torch's; LinAlgError for singular / not positive-definite input in
compiled code too; meta shapes; out=."""
import math

import numpy as np
import pytest

import kiln
from conftest import needs_cxx

torch = pytest.importorskip("torch")

r = np.random.default_rng(16)
A = r.standard_normal((2, 4, 4)) + 3 * np.eye(4)
SPD = A @ np.swapaxes(A, -1, -2) + np.eye(4)
B = r.standard_normal((2, 4, 3))
W = r.standard_normal((5, 3))


def _np(x):
    return x.detach().numpy() if hasattr(x, "detach") else np.asarray(x)


def _leaves(x):
    if isinstance(x, (list, tuple)):
        return [v for item in x for v in _leaves(item)]
    return [x]


def _close(got, want, tol):
    got, want = _leaves(got), _leaves(want)
    assert len(got) == len(want)
    for g, w in zip(got, want):
        assert tuple(g.shape) == tuple(w.shape)
        assert str(g.dtype).split(".")[-1] == str(w.dtype).split(".")[-1]
        np.testing.assert_allclose(_np(g), _np(w), rtol=tol, atol=tol)


def everything(T, a, spd, b):
    """Every captured linalg op, with sign-invariant uses of the eigen/singular vectors."""
    LA = T.linalg
    L = LA.cholesky(spd)
    U = LA.cholesky(spd, upper=True)
    Q, R = LA.qr(a)
    w, V = LA.eigh(spd)
    u, s, vh = LA.svd(a, full_matrices=False)
    sign, logabs = LA.slogdet(a)
    return (LA.inv(a), LA.det(a), sign, logabs, T.logdet(spd), LA.solve(a, b), LA.solve(a, b[..., 0]),
            LA.solve(a[0], b.mT, left=False), LA.solve_triangular(L, b, upper=False),
            LA.solve_triangular(U, b, upper=True, unitriangular=True),
            LA.solve_triangular(L, b.mT, upper=False, left=False), L, U, T.cholesky_solve(b, L),
            LA.cholesky_ex(spd).L, LA.inv_ex(a).inverse, Q @ R, R.abs(), w, (V * w.unsqueeze(-2)) @ V.mT,
            (u * s.unsqueeze(-2)) @ vh, LA.svdvals(a), LA.eigvalsh(spd), LA.pinv(a), LA.matrix_rank(a),
            LA.matrix_norm(a, 2), LA.matrix_norm(a, "nuc"))


@needs_cxx
@pytest.mark.parametrize("dtype", ["float64", "float32"])
def test_compiled_equals_eager_and_torch(strict_inductor, dtype):
    tol = 1e-8 if dtype == "float64" else 2e-3
    args = [kiln.tensor(x, dtype=getattr(kiln, dtype)) for x in (A, SPD, B)]
    eager = everything(kiln, *args)
    compiled = kiln.compile(lambda *xs: everything(kiln, *xs))(*args)
    want = everything(torch, *[torch.tensor(x, dtype=getattr(torch, dtype)) for x in (A, SPD, B)])
    _close(eager, want, tol)
    _close(compiled, want, tol)


def test_one_graph_no_break():
    kiln.compiler.reset()
    args = [kiln.tensor(x) for x in (A, SPD, B)]
    report = kiln.explain(lambda *xs: everything(kiln, *xs))(*args)
    assert (report.graph_count, report.graph_break_count) == (1, 0), report.break_reasons
    kiln.compiler.reset()


def gaussian_loglik(T, x, mu, L0):
    cov = L0 @ L0.mT + T.eye(3) * 0.5
    L = T.linalg.cholesky(cov)
    z = T.linalg.solve_triangular(L, (x - mu).unsqueeze(-1), upper=False).squeeze(-1)
    logdet = 2 * L.diagonal(dim1=-2, dim2=-1).log().sum(-1)
    return -0.5 * ((z * z).sum(-1) + logdet + 3 * math.log(2 * math.pi))


def factor_losses(T, a, spd):
    """A scalar reading every differentiable output (eigen/singular vectors sign-invariantly)."""
    LA = T.linalg
    Q, R = LA.qr(a)
    w, V = LA.eigh(spd)
    u, s, vh = LA.svd(a, full_matrices=False)
    terms = [LA.inv(a).sum(), LA.det(a).sum(), LA.slogdet(a).logabsdet.sum(), LA.solve(a, spd).sum(),
             LA.cholesky(spd).sum(), (Q * Q.sum(-2, keepdim=True)).sum() + R.square().sum(),
             w.sum() + (V.square() * T.arange(4.0, dtype=a.dtype)).sum(),
             s.sum() + (u.square().sum(-2) * s).sum() + (vh.square() * T.arange(4.0, dtype=a.dtype)).sum(),
             LA.svdvals(a).sum(), LA.eigvalsh(spd).square().sum()]
    return sum(terms)


def _grads(T, fn, arrays, dtype, compiled=False):
    leaves = [T.tensor(x, dtype=getattr(T, dtype), requires_grad=True) for x in arrays]
    f = kiln.compile(lambda *xs: fn(T, *xs)) if compiled else (lambda *xs: fn(T, *xs))
    out = f(*leaves)
    out.sum().backward()
    return [out] + [x.grad for x in leaves]


@needs_cxx
@pytest.mark.parametrize("dtype", ["float64", "float32"])
@pytest.mark.parametrize("case", ["loglik", "factors"])
def test_compiled_gradients(strict_inductor, case, dtype):
    tol = 1e-7 if dtype == "float64" else 2e-3
    if case == "loglik":
        fn, arrays = gaussian_loglik, [r.standard_normal((5, 3)), r.standard_normal(3), r.standard_normal((3, 3))]
    else:
        fn, arrays = factor_losses, [A[0], SPD[0]]
    want = _grads(torch, fn, arrays, dtype)
    _close(_grads(kiln, fn, arrays, dtype), want, tol)
    _close(_grads(kiln, fn, arrays, dtype, compiled=True), want, tol)


@needs_cxx
def test_training_compiles_one_graph_with_backward(strict_inductor):
    x, mu, L0 = (kiln.tensor(r.standard_normal(s)) for s in ((5, 3), (3,), (3, 3)))
    mu.requires_grad_()
    L0.requires_grad_()

    def step(x, mu, L0):
        loss = -gaussian_loglik(kiln, x, mu, L0).mean()
        return (loss.detach(),) + tuple(kiln.autograd.grad(loss, [mu, L0]))

    kiln.compiler.reset()
    report = kiln.explain(step)(x, mu, L0)
    # kiln.autograd.grad runs between graphs (torch.compile's break too); the linalg calls do not break.
    assert report.break_reasons and all("autograd.grad" in b.reason for b in report.break_reasons), \
        report.break_reasons
    got = kiln.compile(step)(x, mu, L0)
    tx, tmu, tL0 = (torch.tensor(_np(t), requires_grad=True) for t in (x, mu, L0))
    loss = -gaussian_loglik(torch, tx, tmu, tL0).mean()
    _close(got, (loss.detach(),) + torch.autograd.grad(loss, [tmu, tL0]), 1e-8)


@needs_cxx
@pytest.mark.parametrize("compiled", [False, True])
def test_errors(strict_inductor, compiled):
    def run(fn, *args):
        return (kiln.compile(fn) if compiled else fn)(*args)

    with pytest.raises(kiln.linalg.LinAlgError, match="singular"):
        run(lambda a: kiln.linalg.inv(a) + 1, kiln.zeros(3, 3))
    with pytest.raises(kiln.linalg.LinAlgError, match=r"Batch element 1.*positive-definite"):
        run(lambda a: kiln.linalg.cholesky(a) * 2, kiln.stack([kiln.eye(3), -kiln.eye(3)]))
    with pytest.raises(kiln.linalg.LinAlgError, match="singular"):
        run(lambda a, b: kiln.linalg.solve(a, b), kiln.ones(3, 3), kiln.ones(3))
    assert isinstance(kiln.linalg.LinAlgError("x"), RuntimeError)
    with pytest.raises(RuntimeError, match="square matrices"):
        run(lambda a: kiln.linalg.det(a), kiln.ones(2, 3))
    with pytest.raises(RuntimeError, match="Low precision dtypes not supported. Got Half"):
        run(lambda a: kiln.linalg.inv(a), kiln.eye(2, dtype=kiln.float16))
    with pytest.raises(RuntimeError, match="Expected a floating point"):
        run(lambda a: kiln.linalg.eigh(a), kiln.ones(2, 2, dtype=kiln.int64))
    with pytest.raises(RuntimeError, match="Incompatible shapes"):
        run(lambda a, b: kiln.linalg.solve(a, b), kiln.eye(3), kiln.ones(4, 2))
    with pytest.raises(RuntimeError, match="same dtype"):
        run(lambda a, b: kiln.linalg.solve(a, b), kiln.eye(3), kiln.ones(3, 2, dtype=kiln.float64))
    with pytest.raises(RuntimeError, match="must match the size"):
        run(lambda a, b: kiln.linalg.solve_triangular(a, b, upper=True), kiln.ones(2, 3, 3), kiln.ones(3, 3, 1))


def test_ex_variants_report_info_without_raising():
    L, info = kiln.linalg.cholesky_ex(kiln.stack([kiln.eye(2), -kiln.eye(2)]))
    assert info.dtype == kiln.int32 and info.tolist() == [0, 1]
    inverse, info = kiln.linalg.inv_ex(kiln.zeros(2, 2))
    assert info.tolist() == torch.linalg.inv_ex(torch.zeros(2, 2)).info.tolist() == 1 and inverse.shape == (2, 2)
    tL, tinfo = torch.linalg.cholesky_ex(torch.stack([torch.eye(2), -torch.eye(2)]))
    assert tinfo.tolist() == [0, 1]
    np.testing.assert_allclose(L[0].numpy(), tL[0].numpy())


def test_meta_shapes():
    m = kiln.empty(2, 5, 3, device="meta")
    sq = kiln.empty(2, 4, 4, device="meta")
    Q, R = kiln.linalg.qr(m)
    assert (Q.shape, R.shape) == ((2, 5, 3), (2, 3, 3))
    Q, R = kiln.linalg.qr(m, mode="r")
    assert (Q.shape, R.shape) == ((0,), (2, 3, 3))
    Q, R = kiln.linalg.qr(m, mode="complete")
    assert (Q.shape, R.shape) == ((2, 5, 5), (2, 5, 3))
    U, S, Vh = kiln.linalg.svd(m)
    assert (U.shape, S.shape, Vh.shape) == ((2, 5, 5), (2, 3), (2, 3, 3))
    assert kiln.linalg.svdvals(m).shape == (2, 3)
    w, V = kiln.linalg.eigh(sq)
    assert (w.shape, V.shape) == ((2, 4), (2, 4, 4))
    assert kiln.linalg.det(sq).shape == (2,)
    assert kiln.linalg.solve(sq, kiln.empty(4, device="meta")).shape == (2, 4)
    assert kiln.linalg.solve(sq, kiln.empty(3, 1, 4, 2, device="meta")).shape == (3, 2, 4, 2)
    assert kiln.linalg.solve_triangular(sq, kiln.empty(4, 6, device="meta"), upper=True).shape == (2, 4, 6)
    assert kiln.linalg.cholesky_ex(sq).info.shape == (2,)


def test_broadcasting_solve_and_gradients_sum_back():
    a = kiln.tensor(A[0], requires_grad=True)
    b = kiln.tensor(r.standard_normal((3, 4, 2)), requires_grad=True)
    x = kiln.linalg.solve(a, b)
    x.sum().backward()
    ta = torch.tensor(A[0], requires_grad=True)
    tb = torch.tensor(_np(b), requires_grad=True)
    torch.linalg.solve(ta, tb).sum().backward()
    np.testing.assert_allclose(_np(x), torch.linalg.solve(ta, tb).detach().numpy(), rtol=1e-10)
    np.testing.assert_allclose(_np(a.grad), _np(ta.grad), rtol=1e-8)
    np.testing.assert_allclose(_np(b.grad), _np(tb.grad), rtol=1e-8)


def test_out():
    a = kiln.tensor(A[0])
    out = kiln.empty(4, 4, dtype=kiln.float64)
    assert kiln.linalg.inv(a, out=out) is out
    np.testing.assert_allclose(out.numpy(), np.linalg.inv(A[0]), rtol=1e-10)
    resized = kiln.empty(0, dtype=kiln.float64)
    kiln.linalg.det(a, out=resized)
    np.testing.assert_allclose(resized.numpy(), np.linalg.det(A[0]), rtol=1e-10)
    w, V = kiln.empty(4, dtype=kiln.float64), kiln.empty(4, 4, dtype=kiln.float64)
    res = kiln.linalg.eigh(kiln.tensor(SPD[0]), out=(w, V))
    assert res.eigenvalues is w and res.eigenvectors is V
    np.testing.assert_allclose(w.numpy(), np.linalg.eigvalsh(SPD[0]), rtol=1e-10)
    with pytest.raises(RuntimeError, match="don't support automatic differentiation"):
        kiln.linalg.inv(kiln.tensor(A[0], requires_grad=True), out=out)
    with pytest.raises(RuntimeError, match="dtype"):
        kiln.linalg.inv(a, out=kiln.empty(4, 4))
