"""kiln.linalg's factorizations and solves (kiln/_lapack.py) against torch.linalg: values,
batches, gradients (inv, det, slogdet, solve, solve_triangular, cholesky, eigvalsh, svdvals,
the spectral matrix norms), errors for singular / not positive-definite inputs."""
import numpy as np
import pytest

import kiln

torch = pytest.importorskip("torch")

r = np.random.default_rng(0)
A = r.standard_normal((2, 4, 4)) + 4 * np.eye(4)
SPD = A @ np.swapaxes(A, -1, -2) + np.eye(4)
B = r.standard_normal((2, 4, 3))
b = r.standard_normal((2, 4))


def _leaves(x):
    if isinstance(x, (list, tuple)):
        return [v for item in x for v in _leaves(item)]
    return [x]


def check(build, dtype="float64", tol=1e-6):
    got, want = _leaves(build(kiln, getattr(kiln, dtype))), _leaves(build(torch, getattr(torch, dtype)))
    assert len(got) == len(want)
    for a, w in zip(got, want):
        assert tuple(a.shape) == tuple(w.shape) and str(a.dtype).split(".")[1] == str(w.dtype).split(".")[1]
        np.testing.assert_allclose(a.detach().numpy(), w.detach().numpy(), rtol=tol, atol=tol)


def leaf(T, x, dt):
    return T.tensor(x, dtype=dt, requires_grad=True)


@pytest.mark.parametrize("dtype", ["float64", "float32"])
def test_values_and_gradients(dtype):
    tol = 1e-6 if dtype == "float64" else 2e-3

    def grads(T, dt, fn, *xs):
        ins = [leaf(T, x, dt) for x in xs]
        out = fn(T, *ins)
        outs = _leaves(out)
        sum((o * (i + 1)).sum() for i, o in enumerate(outs) if o.requires_grad).backward()
        return outs + [i.grad for i in ins]

    L = kiln.linalg
    check(lambda T, dt: grads(T, dt, lambda T, a: T.linalg.inv(a), A), dtype, tol)
    check(lambda T, dt: grads(T, dt, lambda T, a: T.linalg.det(a), A), dtype, tol)
    check(lambda T, dt: grads(T, dt, lambda T, a: T.linalg.slogdet(a), A), dtype, tol)
    check(lambda T, dt: grads(T, dt, lambda T, a, c: T.linalg.solve(a, c), A, B), dtype, tol)
    check(lambda T, dt: grads(T, dt, lambda T, a, c: T.linalg.solve(a, c), A, b), dtype, tol)
    check(lambda T, dt: grads(T, dt, lambda T, a, c: T.linalg.solve(a, c, left=False), A, np.swapaxes(B, -1, -2)),
          dtype, tol)
    check(lambda T, dt: grads(T, dt, lambda T, a, c: T.linalg.solve_triangular(a, c, upper=False), A, B), dtype, tol)
    check(lambda T, dt: grads(T, dt, lambda T, a: T.linalg.cholesky(a), SPD), dtype, tol)
    check(lambda T, dt: grads(T, dt, lambda T, a: T.linalg.eigvalsh(a), SPD), dtype, tol)
    check(lambda T, dt: grads(T, dt, lambda T, a: T.linalg.svdvals(a), A[0, :3]), dtype, tol)
    check(lambda T, dt: grads(T, dt, lambda T, a: [T.linalg.matrix_norm(a, o) for o in (2, -2, "nuc")], A), dtype, tol)
    check(lambda T, dt: [T.linalg.pinv(T.tensor(A[0, :3], dtype=dt)), T.linalg.matrix_rank(T.tensor(A, dtype=dt))],
          dtype, tol)
    check(lambda T, dt: [T.logdet(T.tensor(-A[0], dtype=dt)), T.tensor(A, dtype=dt).det(),
                         T.tensor(A, dtype=dt).inverse()], dtype, tol)
    assert L.eigh is not None


def test_factorizations_reconstruct():
    a = kiln.tensor(A)
    q, rr = kiln.linalg.qr(a)
    np.testing.assert_allclose((q @ rr).numpy(), A, atol=1e-10)
    w, v = kiln.linalg.eigh(kiln.tensor(SPD))
    np.testing.assert_allclose((v @ kiln.diag_embed(w) @ v.transpose(-2, -1)).numpy(), SPD, atol=1e-9)
    u, s, vh = kiln.linalg.svd(a, full_matrices=False)
    np.testing.assert_allclose((u * s.unsqueeze(-2) @ vh).numpy(), A, atol=1e-10)
    U, S, V = kiln.svd(a)
    np.testing.assert_allclose((U * S.unsqueeze(-2) @ V.transpose(-2, -1)).numpy(), A, atol=1e-10)
    np.testing.assert_allclose(kiln.cholesky_solve(kiln.tensor(B), kiln.linalg.cholesky(kiln.tensor(SPD))).numpy(),
                               np.linalg.solve(SPD, B), atol=1e-9)


def test_errors():
    with pytest.raises(kiln.linalg.LinAlgError, match="singular"):
        kiln.linalg.inv(kiln.zeros(3, 3))
    with pytest.raises(kiln.linalg.LinAlgError, match="positive-definite"):
        kiln.linalg.cholesky(-kiln.eye(3))
    with pytest.raises(RuntimeError, match="square matrices"):
        kiln.linalg.det(kiln.ones(2, 3))
    with pytest.raises(RuntimeError, match="Low precision dtypes not supported. Got Half"):
        kiln.linalg.inv(kiln.eye(2, dtype=kiln.float16))
    x = kiln.tensor(A, requires_grad=True)
    with pytest.raises(RuntimeError, match="mode='r'"):
        kiln.linalg.qr(x, mode="r").R.sum().backward()


@pytest.mark.parametrize("shape", [(2, 4, 4), (5, 3), (3, 5)])
def test_qr_gradient_matches_torch(shape):
    a = r.standard_normal(shape)
    got, want = [], []
    for T, out in ((kiln, got), (torch, want)):
        x = T.tensor(a, requires_grad=True)
        Q, R = T.linalg.qr(x)
        (Q * T.tensor(np.arange(Q.shape[-1], dtype=np.float64))).sum().add(R.square().sum()).backward()
        out.append(x.grad.numpy())
    np.testing.assert_allclose(got[0], want[0], rtol=1e-8, atol=1e-10)
