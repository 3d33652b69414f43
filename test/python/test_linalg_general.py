"""linalg.lstsq, lu_factor/lu/lu_solve, eig/eigvals and matrix_exp against PyTorch: values,
the result fields and dtypes of each driver, gradients, errors."""
import numpy as np
import pytest

import kiln
from oracle import assert_match, both, need_torch, sample

TOL = dict(rtol=1e-9, atol=1e-10)


def pair(shape, seed=0, dtype="float64"):
    return both(sample(shape, dtype, seed, -2, 2), dtype)


def rank_deficient(seed=0):
    a = sample((6, 4), "float64", seed)
    a[:, 3] = a[:, 1] - 2 * a[:, 0]
    return both(a)


@pytest.mark.parametrize("driver", [None, "gels", "gelsy", "gelsd", "gelss"])
@pytest.mark.parametrize("shapes", [((5, 3), (5, 2)), ((3, 5), (3, 2)), ((2, 6, 4), (1, 6, 3)), ((4, 4), (4,)),
                                    ((2, 5, 3), (2, 5)), ((1, 6, 4), (3, 6, 2))])
def test_lstsq_fields_match_torch(driver, shapes):
    torch = need_torch()
    (ka, ta), (kb, tb) = pair(shapes[0], 1), pair(shapes[1], 2)
    if driver == "gels" and shapes[0][-2] < shapes[0][-1]:
        pytest.skip("gels on a wide matrix: torch's result depends on LAPACK's underdetermined path")
    got = kiln.linalg.lstsq(ka, kb, driver=driver)
    want = torch.linalg.lstsq(ta, tb, driver=driver)
    assert type(got).__name__ == type(want).__name__ == "torch_return_types_linalg_lstsq" or \
        type(want).__name__ == "linalg_lstsq"
    for field in ("solution", "residuals", "rank", "singular_values"):
        assert_match(getattr(got, field), getattr(want, field), **TOL)


def test_lstsq_rank_deficient_and_rcond():
    torch = need_torch()
    ka, ta = rank_deficient()
    kb, tb = pair((6, 2), 3)
    for driver in ("gelsy", "gelsd", "gelss"):
        got, want = kiln.linalg.lstsq(ka, kb, driver=driver), torch.linalg.lstsq(ta, tb, driver=driver)
        for field in ("solution", "residuals", "rank", "singular_values"):
            assert_match(getattr(got, field), getattr(want, field), **TOL)
    got = kiln.linalg.lstsq(ka, kb, rcond=0.5, driver="gelsd")
    want = torch.linalg.lstsq(ta, tb, rcond=0.5, driver="gelsd")
    assert_match(got.rank, want.rank)
    assert_match(got.solution, want.solution, **TOL)


@pytest.mark.parametrize("shapes", [((5, 3), (5, 2)), ((3, 5), (3, 2)), ((2, 4, 3), (4,)), ((4, 4), (4, 1))])
def test_lstsq_gradients(shapes):
    torch = need_torch()
    (ka, ta), (kb, tb) = pair(shapes[0], 4), pair(shapes[1], 5)
    if len(shapes[1]) == 1:
        (kb, tb) = pair((2, 4), 5)
    for t in (ka, ta, kb, tb):
        t.requires_grad_(True)
    kx, tx = kiln.linalg.lstsq(ka, kb).solution, torch.linalg.lstsq(ta, tb).solution
    g = sample(tuple(tx.shape), "float64", 6)
    kg, tg = both(g)
    (kx * kg).sum().backward()
    (tx * tg).sum().backward()
    assert_match(ka.grad, ta.grad, rtol=1e-8, atol=1e-9)
    assert_match(kb.grad, tb.grad, rtol=1e-8, atol=1e-9)


def test_lstsq_errors_match_torch():
    torch = need_torch()
    (ka, ta), (kb, tb) = pair((5, 3), 1), pair((5, 2), 2)
    for call in (lambda L, a, b: L.lstsq(a.float(), b), lambda L, a, b: L.lstsq(a, b[:4]),
                 lambda L, a, b: L.lstsq(a, b, driver="foo"), lambda L, a, b: L.lstsq(a, b[:, 0].expand(2, 3, 5)),
                 lambda L, a, b: L.lstsq(a.expand(2, 5, 3), b.expand(4, 5, 2)),
                 lambda L, a, b: L.lstsq(a.expand(2, 5, 3), b)):
        with pytest.raises(RuntimeError) as want:
            call(torch.linalg, ta, tb)
        with pytest.raises(RuntimeError) as got:
            call(kiln.linalg, ka, kb)
        assert str(got.value) == str(want.value)


@pytest.mark.parametrize("shape", [(4, 4), (3, 5, 5), (5, 3), (3, 5)])
@pytest.mark.parametrize("dtype", ["float32", "float64"])
def test_lu_factor_and_lu(shape, dtype):
    torch = need_torch()
    ka, ta = pair(shape, 7, dtype)
    got, want = kiln.linalg.lu_factor(ka), torch.linalg.lu_factor(ta)
    tol = TOL if dtype == "float64" else dict(rtol=1e-5, atol=1e-5)
    assert_match(got.LU, want.LU, **tol)
    assert_match(got.pivots, want.pivots)
    got, want = kiln.linalg.lu(ka), torch.linalg.lu(ta)
    for field in ("P", "L", "U"):
        assert_match(getattr(got, field), getattr(want, field), **tol)


def test_lu_solve_and_gradients():
    torch = need_torch()
    ka, ta = pair((2, 4, 4), 8)
    kb, tb = pair((2, 4, 3), 9)
    klu, kp = kiln.linalg.lu_factor(ka)
    tlu, tp = torch.linalg.lu_factor(ta)
    for kwargs in ({}, {"adjoint": True}, {"left": False}):
        b_k, b_t = (kb, tb) if kwargs.get("left", True) else (kb.transpose(-2, -1), tb.transpose(-2, -1))
        assert_match(kiln.linalg.lu_solve(klu, kp, b_k, **kwargs), torch.linalg.lu_solve(tlu, tp, b_t, **kwargs),
                     **TOL)
    ka.requires_grad_(True)
    ta.requires_grad_(True)
    kP, kL, kU = kiln.linalg.lu(ka)
    tP, tL, tU = torch.linalg.lu(ta)
    gl, gu = sample((2, 4, 4), "float64", 10), sample((2, 4, 4), "float64", 11)
    ((kL * kiln.from_numpy(gl)).sum() + (kU * kiln.from_numpy(gu)).sum()).backward()
    ((tL * torch.from_numpy(gl)).sum() + (tU * torch.from_numpy(gu)).sum()).backward()
    assert_match(ka.grad, ta.grad, rtol=1e-8, atol=1e-9)


@pytest.mark.parametrize("shape", [(3, 3), (2, 4, 4), (1, 1)])
def test_matrix_exp_values_and_gradient(shape):
    torch = need_torch()
    for scale in (0.1, 3.0):
        a = sample(shape, "float64", 12) * scale
        ka, ta = both(a)
        ka.requires_grad_(True)
        ta.requires_grad_(True)
        kout, tout = kiln.linalg.matrix_exp(ka), torch.linalg.matrix_exp(ta)
        assert_match(kout, tout, rtol=1e-10, atol=1e-10)
        g = sample(shape, "float64", 13)
        (kout * kiln.from_numpy(g)).sum().backward()
        (tout * torch.from_numpy(g)).sum().backward()
        assert_match(ka.grad, ta.grad, rtol=1e-8, atol=1e-9)
    kf, tf = pair((3, 3), 14, "float32")
    assert_match(kiln.matrix_exp(kf), torch.matrix_exp(tf), rtol=1e-5, atol=1e-5)
    assert_match(kf.matrix_exp(), tf.matrix_exp(), rtol=1e-5, atol=1e-5)


def test_eig_and_eigvals_are_complex_as_torch():
    torch = need_torch()
    ka, ta = pair((2, 4, 4), 15)
    got, want = kiln.linalg.eig(ka), torch.linalg.eig(ta)
    assert str(got.eigenvalues.dtype) == "kiln.complex128"
    np.testing.assert_allclose(got.eigenvalues.numpy(), want.eigenvalues.numpy(), rtol=1e-10, atol=1e-10)
    np.testing.assert_allclose(got.eigenvectors.numpy(), want.eigenvectors.numpy(), rtol=1e-10, atol=1e-10)
    kf, tf = pair((3, 3), 16, "float32")
    w = kiln.linalg.eigvals(kf)
    assert str(w.dtype) == "kiln.complex64"
    np.testing.assert_allclose(w.numpy(), torch.linalg.eigvals(tf).numpy(), rtol=1e-5, atol=1e-5)
    with pytest.raises(RuntimeError, match="must be batches of square matrices"):
        kiln.linalg.eig(kiln.ones(2, 3))
