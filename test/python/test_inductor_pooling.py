"""Pooling lowered into the loop IR (compiler/lowering/Pooling.cpp): max_pool2d's values and
indices compiled and equal to kiln eager (which matches PyTorch: the first maximum of a window
in row-major order wins, a NaN replaces it), fused with the pointwise ops around it instead of
running as an eager fallback op."""
import numpy as np
import pytest

import kiln
from conftest import needs_cxx

pytestmark = [needs_cxx, pytest.mark.usefixtures("strict_inductor")]
F = kiln.nn.functional


def _rand(*shape, seed=0, dtype=np.float32):
    return kiln.from_numpy(np.random.default_rng(seed).standard_normal(shape).astype(dtype))


def _explain(fn, args):
    with kiln.no_grad():
        return kiln.explain(fn)(*args).kernels_per_graph[0]


def _check(fn, args, fused=True):
    plan = _explain(fn, args)
    assert not plan.fallbacks, f"pooling ran as a fallback: {plan.fallbacks}"
    with kiln.no_grad():
        got, want = kiln.compile(fn)(*args), fn(*args)
    got = got if isinstance(got, tuple) else (got,)
    want = want if isinstance(want, tuple) else (want,)
    for g, w in zip(got, want):
        assert g.dtype == w.dtype and g.shape == w.shape
        np.testing.assert_array_equal(g.numpy(), w.numpy())
    if fused:  # one kernel: the pool reads the pointwise op before it and feeds the one after
        assert len(plan.kernels) == 1, plan


# (kernel_size, stride, padding, dilation, ceil_mode): unmasked windows, padding, overlapping
# windows, dilation, ceil_mode's partial last window, rectangular windows.
CONFIGS = [
    (2, None, 0, 1, False),
    (3, 2, 1, 1, False),
    (3, 1, 1, 1, False),
    (3, 2, 1, 2, False),
    (3, 2, 0, 1, True),
    (2, 2, 1, 1, True),
    ((2, 3), (1, 2), (1, 0), (1, 1), False),
    (2, 3, 1, 2, False),                      # windows apart, dilated: one candidate per dim
    ((2, 3), (2, 3), (1, 1), (1, 1), True),
]


@pytest.mark.parametrize("config", CONFIGS, ids=[str(c) for c in CONFIGS])
def test_max_pool2d_values_and_indices_equal_eager(config):
    k, s, p, d, ceil = config

    def fn(x):
        v, i = F.max_pool2d(kiln.relu(x) - 0.5, k, s, p, d, ceil_mode=ceil, return_indices=True)
        return v * 2, i

    _check(fn, (_rand(2, 3, 9, 11, seed=1),), fused=False)


def test_max_pool2d_fuses_with_neighbours():
    _check(lambda x: F.max_pool2d(kiln.relu(x), 2) + 1, (_rand(2, 4, 8, 8, seed=2),))


def test_max_pool2d_3d_input():
    _check(lambda x: F.max_pool2d(x, 3, 2, 1) * 3, (_rand(4, 7, 7, seed=3),))


def test_max_pool2d_nan_and_ties_follow_eager():
    a = np.random.default_rng(4).standard_normal((1, 2, 6, 6)).astype(np.float32)
    a[0, 0, 0, 1] = np.nan          # a NaN after the window's first element
    a[0, 0, 2:4, 2:4] = 1.5         # a tie: the first in row-major order wins
    a[0, 1, 0:2, 0:2] = -np.inf     # a window of -inf only: index of its first element
    a[0, 1, 4, 4] = np.nan
    a[0, 1, 5, 5] = np.nan          # two NaNs in a window: the last one's index
    x = kiln.from_numpy(a)
    for padding in (0, 1):
        _check(lambda x: F.max_pool2d(x, 2, 2, padding, return_indices=True), (x,), fused=False)


@pytest.mark.parametrize("dtype", [np.float64, np.float16, np.int32, np.uint8])
def test_max_pool2d_dtypes(dtype):
    a = np.random.default_rng(5).standard_normal((2, 2, 7, 7)) * 50
    x = kiln.from_numpy(np.abs(a).astype(dtype) if dtype == np.uint8 else a.astype(dtype))
    _check(lambda x: F.max_pool2d(x, 3, 2, 1, return_indices=True), (x,), fused=False)


def test_max_pool2d_in_a_cnn_equals_torch():
    torch = pytest.importorskip("torch")
    rng = np.random.default_rng(6)
    arrays = [rng.standard_normal(s).astype(np.float32) for s in ((2, 3, 16, 16), (8, 3, 3, 3), (8,))]

    def net(T):
        def fn(x, w, b):
            h = T.nn.functional.relu(T.nn.functional.conv2d(x, w, b, padding=1))
            return T.nn.functional.max_pool2d(h, 3, 2, 1).mean(dim=(2, 3))
        return fn

    got = kiln.compile(net(kiln))(*[kiln.from_numpy(a) for a in arrays])
    want = net(torch)(*[torch.from_numpy(a) for a in arrays])
    np.testing.assert_allclose(got.numpy(), want.numpy(), rtol=1e-5, atol=1e-6)


@pytest.mark.parametrize("config", CONFIGS, ids=[str(c) for c in CONFIGS])
@pytest.mark.parametrize("dtype", [np.float32, np.float64])
def test_max_pool2d_backward_compiled_equals_eager(config, dtype):
    k, s, p, d, ceil = config
    a = np.random.default_rng(7).standard_normal((2, 3, 9, 11)).astype(dtype)
    a[0, 0, 3:6, 3:6] = 0.25  # ties: overlapping windows pick the same element

    def fn(x):
        return (F.max_pool2d(x * 2, k, s, p, d, ceil_mode=ceil) ** 2).sum()

    grads = []
    for f in (fn, kiln.compile(fn)):
        x = kiln.from_numpy(a.copy()).requires_grad_()
        f(x).backward()
        grads.append(x.grad.numpy())
    plan = kiln.explain(fn)(kiln.from_numpy(a).requires_grad_()).kernels_per_graph[0]
    assert "max_pool2d" not in str(plan), plan  # forward and backward both lowered
    np.testing.assert_array_equal(grads[1], grads[0])


# (kernel_size, stride, padding, ceil_mode, count_include_pad, divisor_override)
AVG_CONFIGS = [
    (2, None, 0, False, True, None),
    (3, 2, 1, False, True, None),
    (3, 2, 1, False, False, None),
    (3, 2, 1, True, True, None),
    (3, 2, 1, True, False, None),
    ((2, 3), (1, 2), (1, 1), False, True, 5),
]


@pytest.mark.parametrize("config", AVG_CONFIGS, ids=[str(c) for c in AVG_CONFIGS])
@pytest.mark.parametrize("dtype", [np.float32, np.float64])
def test_avg_pool2d_equals_eager(config, dtype):
    k, s, p, ceil, include, divisor = config
    x = kiln.from_numpy(np.random.default_rng(8).standard_normal((2, 3, 9, 11)).astype(dtype))

    def fn(x):
        return F.avg_pool2d(kiln.relu(x), k, s, p, ceil, include, divisor) + 1

    _check(fn, (x,))


@pytest.mark.parametrize("size", [1, 2, (3, 5)])
def test_adaptive_avg_pool2d_that_divides_equals_eager(size):
    x = _rand(2, 4, 6, 10, seed=9)
    _check(lambda x: F.adaptive_avg_pool2d(x * 2, size) - 1, (x,))


def test_adaptive_avg_pool2d_that_does_not_divide_is_a_fallback():
    x = _rand(1, 2, 7, 7, seed=10)
    fn = lambda x: F.adaptive_avg_pool2d(x, 3) * 2  # noqa: E731
    plan = _explain(fn, (x,))
    assert [op for _, op in plan.fallbacks] == ["aten._adaptive_avg_pool2d"]
    with kiln.no_grad():
        np.testing.assert_array_equal(kiln.compile(fn)(x).numpy(), fn(x).numpy())


@pytest.mark.parametrize("config", AVG_CONFIGS + [(3, 1, 1, False, True, None)],
                         ids=[str(c) for c in AVG_CONFIGS + [(3, 1, 1, False, True, None)]])
@pytest.mark.parametrize("dtype", [np.float32, np.float64])
def test_avg_pool2d_backward_compiled_equals_eager(config, dtype):
    # Each input adds grad / divisor of the outputs whose window holds it, in eager's order.
    k, s, p, ceil, include, divisor = config
    a = np.random.default_rng(11).standard_normal((2, 3, 9, 11)).astype(dtype)

    def fn(x):
        return (F.avg_pool2d(x * 2, k, s, p, ceil, include, divisor) ** 2).sum() + \
            (F.adaptive_avg_pool2d(x, (3, 1)) ** 2).sum()

    grads = []
    for f in (fn, kiln.compile(fn)):
        x = kiln.from_numpy(a.copy()).requires_grad_()
        f(x).backward()
        grads.append(x.grad.numpy())
    plan = kiln.explain(fn)(kiln.from_numpy(a).requires_grad_()).kernels_per_graph[0]
    assert "avg_pool2d" not in str(plan), plan  # forward and backward both lowered
    np.testing.assert_array_equal(grads[1], grads[0])


def test_pooling_over_a_symbolic_batch(training_compiles):
    # A CNN trained with changing batch sizes: the batch dim passes through the window loaders,
    # so the forward and backward compile once more over the size symbol, not once per size.
    seen = training_compiles

    def fn(x):
        y = F.max_pool2d(kiln.relu(x), 3, 2, 1) + F.avg_pool2d(x, 3, 2, 1, False, False)
        return (y * F.adaptive_avg_pool2d(x, (5, 5))).sum()

    compiled = kiln.compile(fn)
    for batch in (2, 3, 5, 8):
        a = np.random.default_rng(batch).standard_normal((batch, 3, 10, 10)).astype(np.float32)
        grads = []
        for f in (fn, compiled):
            x = kiln.from_numpy(a.copy()).requires_grad_()
            f(x).backward()
            grads.append(x.grad.numpy())
        np.testing.assert_array_equal(grads[1], grads[0])
    assert len(seen) == 2 and seen[0] is None and "s0" in seen[1], seen
