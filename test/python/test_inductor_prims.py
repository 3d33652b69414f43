"""Prims the inductor backend compiles beyond pointwise/reduction/GEMM: cat (parts chosen by
comparisons, loaded at in-bounds indices), empty_strided, and random draws (run eagerly at each
call from the default generator, so compiled results equal eager ones under the same seed;
compiling itself must not advance the generator: a regression). Checked against PyTorch and
eager kiln."""

import numpy as np
import pytest

import kiln
from conftest import needs_cxx
from oracle import need_torch

pytestmark = [needs_cxx, pytest.mark.usefixtures("strict_inductor")]


r = np.random.default_rng(0)
A = r.standard_normal((4, 5)).astype(np.float32)
B = r.standard_normal((4, 3)).astype(np.float32)
C = r.standard_normal((2, 5)).astype(np.float32)
I = r.integers(0, 5, (4, 2)).astype(np.int64)

CAT_CASES = {
    "last_dim": lambda T, a, b, c, i: T.cat([a, b], dim=1) * 2,
    "first_dim_three_parts_then_sum": lambda T, a, b, c, i: T.cat([a, c, a], dim=0).sum(0),
    "transposed_parts": lambda T, a, b, c, i: T.cat([a.t(), b.t()], dim=0).exp(),
    "promotes_int_part": lambda T, a, b, c, i: T.cat([a, i], dim=1),
    "empty_part": lambda T, a, b, c, i: T.cat([a, b[:, :0], b], dim=-1) + 1,
    "stack": lambda T, a, b, c, i: T.stack([a, a * 2], dim=1),
    "single_part": lambda T, a, b, c, i: T.cat([b], dim=0) - 1,
}


@pytest.mark.parametrize("name", sorted(CAT_CASES))
def test_cat(name):
    torch = need_torch()
    fn = CAT_CASES[name]
    got = kiln.compile(lambda *x: fn(kiln, *x), backend="inductor")(*map(kiln.from_numpy, (A, B, C, I)))
    want = fn(torch, *map(torch.from_numpy, (A, B, C, I)))
    assert tuple(got.shape) == tuple(want.shape)
    assert str(got.dtype).split(".")[-1] == str(want.dtype).split(".")[-1]
    np.testing.assert_allclose(got.numpy(), want.numpy(), rtol=1e-6, atol=1e-6)


def test_empty():
    # Uninitialized values: only the layout is specified.
    got = kiln.compile(lambda x: (kiln.empty(2, 3, dtype=kiln.float64), kiln.cat([kiln.empty(0, 5), x])),
                       backend="inductor")(kiln.from_numpy(A))
    assert tuple(got[0].shape) == (2, 3) and got[0].dtype == kiln.float64
    np.testing.assert_array_equal(got[1].numpy(), A)


def _draws(x):
    noise = kiln.rand(4, 5)
    return x * 2 + noise, kiln.randn(3) + 1


def _dropout(x):
    return kiln.nn.functional.dropout(x, 0.5, training=True).sum(0)


@pytest.mark.parametrize("fn", [_draws, _dropout])
def test_random_draws_equal_eager_under_the_same_seed(fn):
    x = kiln.ones(4, 5)
    kiln.manual_seed(7)
    want = fn(x)
    kiln.manual_seed(7)
    got = kiln.compile(fn, backend="inductor")(x)  # the first call compiles, then runs
    want, got = (want, got) if isinstance(want, tuple) else ((want,), (got,))
    for g, w in zip(got, want):
        np.testing.assert_array_equal(g.numpy(), w.numpy())
    # The generator advanced by exactly the draws of one call.
    assert np.array_equal(kiln.rand(3).numpy(), (kiln.manual_seed(7), fn(x), kiln.rand(3))[2].numpy())


@pytest.mark.parametrize("backend", ["eager", "aot_eager", "inductor"])
def test_compiling_does_not_advance_the_generator(backend):
    f = lambda x: x * 2 + kiln.rand(4, 5)
    x = kiln.ones(4, 5)
    kiln.manual_seed(3)
    want = f(x)
    kiln.manual_seed(3)
    np.testing.assert_array_equal(kiln.compile(f, backend=backend)(x).numpy(), want.numpy())


@pytest.mark.parametrize("dtype", ["int64", "int32", "int8", "float16", "bfloat16"])
def test_matmul_of_dtypes_blas_lacks(dtype):
    torch = need_torch()
    g = np.random.default_rng(2)
    integer = dtype.startswith("int")
    make = (lambda *s: g.integers(-3, 4, s)) if integer else (lambda *s: g.standard_normal(s))
    a, b, c = make(5, 6), make(6, 7), make(2, 5, 6)

    def fn(T, x, y, z):
        return (x @ y) * 2, z @ y, x.t() @ x

    got = kiln.compile(lambda *v: fn(kiln, *v), backend="inductor")(
        *(kiln.from_numpy(v).to(getattr(kiln, dtype)) for v in (a, b, c)))
    want = fn(torch, *(torch.from_numpy(v).to(getattr(torch, dtype)) for v in (a, b, c)))
    tol = 0 if integer else (1e-2 if dtype == "float16" else 5e-2)
    for k, t in zip(got, want):
        assert str(k.dtype).split(".")[-1] == dtype and tuple(k.shape) == tuple(t.shape)
        np.testing.assert_allclose(k.to(kiln.float64).numpy(), t.double().numpy(), rtol=tol, atol=tol)


def test_tensor_free_ops_without_prims_run_eagerly_each_call():
    torch = need_torch()

    def fn(T, x):
        return x * T.linspace(-2.5, 3, 5), T.randint(0, 10, (4,))

    x = np.arange(5, dtype=np.float32)
    compiled = kiln.compile(lambda x: fn(kiln, x), backend="inductor")
    kiln.manual_seed(11)
    got = compiled(kiln.from_numpy(x))
    kiln.manual_seed(11)
    eager = fn(kiln, kiln.from_numpy(x))
    np.testing.assert_allclose(got[0].numpy(), fn(torch, torch.from_numpy(x))[0].numpy(), rtol=1e-6)
    np.testing.assert_array_equal(got[1].numpy(), eager[1].numpy())
    assert got[1].dtype == kiln.int64
