"""cumsum and cumprod compiled as a scan (compiler/lowering/Indexing.cpp lowerScan, an extern scan whose
running value is carried along the dim, parallel over the others): equal to kiln eager (the
same running value: double for floats, wrapping for integers), over static and symbolic sizes
and in the backward (cumsum's is a reversed cumsum, cumprod's cumprod_backward), never an
eager fallback."""
import numpy as np
import pytest

import kiln
from conftest import needs_cxx
from test_dynamic_shapes import _counting

pytestmark = [needs_cxx, pytest.mark.usefixtures("strict_inductor")]


def _rand(shape, dtype="float32", seed=0):
    rng = np.random.default_rng(seed)
    if dtype in ("int32", "int64", "uint8"):
        return kiln.from_numpy(rng.integers(-3 if dtype != "uint8" else 0, 4, shape).astype(dtype))
    return kiln.from_numpy((rng.random(shape) + 0.5).astype(dtype))


def _plan(fn, args):
    with kiln.no_grad():
        return kiln.explain(fn)(*args).kernels_per_graph[0]


CASES = [((64, 300), 1, "float32"), ((300, 20), 0, "float32"), ((3, 50, 17), 1, "float64"),
         ((3, 5, 40), -1, "int32"), ((7, 9), 0, "uint8"), ((2, 0, 3), 1, "float32"), ((5,), 0, "float16")]


@pytest.mark.parametrize("op", ["cumsum", "cumprod"])
@pytest.mark.parametrize("shape,dim,dtype", CASES, ids=[f"{s}-{d}-{t}" for s, d, t in CASES])
def test_scan_equals_eager_and_is_lowered(op, shape, dim, dtype):
    def fn(x):
        y = getattr((x * 1.01 if x.dtype.is_floating_point else x + 1), op)(dim)
        return y * 2

    x = _rand(shape, dtype)
    plan = _plan(fn, [x])
    assert not plan.fallbacks, plan.fallbacks
    assert op in str(plan), plan
    got, want = kiln.compile(fn)(x), fn(x)
    assert got.dtype == want.dtype and got.shape == want.shape
    if dtype == "float16":
        np.testing.assert_allclose(got.numpy().astype(np.float32), want.numpy().astype(np.float32), rtol=2e-3)
    else:
        np.testing.assert_array_equal(got.numpy(), want.numpy())


def test_scan_dtype_argument_and_scalar():
    x = _rand((4, 6), "int32")
    fn = lambda a: (a.cumsum(1, dtype=kiln.float64), a.cumprod(0, dtype=kiln.int16), a.sum().cumsum(0))
    for g, w in zip(kiln.compile(fn)(x), fn(x)):
        assert g.dtype == w.dtype
        np.testing.assert_array_equal(g.numpy(), w.numpy())


def test_bool_scan_raises_like_eager():
    x = _rand((3, 4))
    fn = lambda a: (a > 1).cumsum(0, dtype=kiln.bool)
    with pytest.raises(NotImplementedError) as eager:
        fn(x)
    with pytest.raises(NotImplementedError) as compiled:
        kiln.compile(fn)(x)
    assert str(eager.value) in str(compiled.value)


def test_scan_over_symbolic_sizes_compiles_once():
    def fn(x):
        return x.cumsum(1) * x.cumprod(0)

    backend, counts = _counting()
    compiled = kiln.compile(fn, backend=backend, dynamic=True)
    for rows, cols in ((3, 5), (9, 17), (33, 2), (4, 100)):
        x = _rand((rows, cols), seed=rows)
        np.testing.assert_array_equal(compiled(x).numpy(), fn(x).numpy())
    assert counts["compiles"] == 1 and counts["dynamic"] == 1, counts


@pytest.mark.parametrize("zeros", [False, True])
def test_scan_backward_compiled_over_growing_sizes(zeros, training_compiles):
    def loss(x, w):
        return ((x * w).cumsum(1) * x.cumprod(1)).sum()

    compiled = kiln.compile(loss)
    for n in (6, 7, 9, 12):
        data = _rand((3, n), seed=n).numpy()
        if zeros:
            data[:, n // 2] = 0.0
            data[1, 1] = 0.0
        grads = []
        for f in (loss, compiled):
            x = kiln.from_numpy(data.copy()).requires_grad_()
            w = _rand((n,), seed=1).requires_grad_()
            f(x, w).backward()
            grads.append((x.grad.numpy(), w.grad.numpy()))
        for g, w in zip(grads[1], grads[0]):
            np.testing.assert_allclose(g, w, rtol=1e-5, atol=1e-6)
    # static, then over the size that changed
    assert len(training_compiles) == 2 and training_compiles[1] is not None, training_compiles


def test_running_extrema_and_logcumsumexp_compile_with_their_backward():
    # No lowering of their own: eager steps between compiled segments, forward and backward
    # (cummaxmin_backward is a scatter_add, logcumsumexp's backward reverse logcumsumexps).
    def fn(x):
        v, i = (x * 2).cummax(1)
        w, j = x.cummin(0)
        return v * 3 + w, i + j, x.logcumsumexp(1).sin()

    x = _rand((5, 7)) * 4 - 2
    x[1, 2] = x[1, 1]  # a tie: the later index, in both
    got, want = kiln.compile(fn)(x), fn(x)
    for g, w in zip(got, want):
        assert g.dtype == w.dtype
        np.testing.assert_allclose(g.numpy(), w.numpy(), rtol=1e-6)
    xs = [x.clone().requires_grad_() for _ in range(2)]
    for f, a in zip((kiln.compile(fn), fn), xs):
        v, _, s = f(a)
        (v.sum() + s.sum()).backward()
    np.testing.assert_allclose(xs[0].grad.numpy(), xs[1].grad.numpy(), rtol=1e-5, atol=1e-6)


def test_erfinv_compiles_from_its_decomposition():
    # erfinv decomposes to prims (the rational guess and two Newton steps on erf): fused, no
    # fallback, equal to eager across the domain, at +-1 (+-inf) and outside it (NaN).
    y = np.concatenate([np.linspace(-1, 1, 201), [0.7, -0.7, 0.70001, 1 - 1e-7, 1.5, -2.0, np.nan]])
    x = kiln.from_numpy(y.astype(np.float32))
    fn = lambda a: (a * 1.0).erfinv() * 2  # noqa: E731
    plan = _plan(fn, [x])
    assert not plan.fallbacks and plan.num_kernels == 1, plan
    np.testing.assert_allclose(kiln.compile(fn)(x).numpy(), fn(x).numpy(), rtol=2e-6, atol=1e-6)
    xd = kiln.from_numpy(y[:201].clip(-0.99, 0.99))
    np.testing.assert_allclose(kiln.compile(fn)(xd).numpy(), fn(xd).numpy(), rtol=1e-13)
    a, b = (kiln.from_numpy(y[10:190].astype(np.float32)).requires_grad_() for _ in range(2))
    kiln.compile(fn)(a).sum().backward()
    fn(b).sum().backward()
    np.testing.assert_allclose(a.grad.numpy(), b.grad.numpy(), rtol=1e-5)
