"""Regression tests for inductor bugs found by the differential fuzzer (fuzz_inductor.py):
each program runs with torch, kiln eager and kiln.compile (strict) and must agree, outputs
and the inputs after the call."""
import os
import shutil

import numpy as np
import pytest

import kiln
from oracle import assert_match, need_torch, sample

pytestmark = pytest.mark.skipif(shutil.which(os.environ.get("KILN_CXX", "c++")) is None,
                                reason="no C++ compiler")


@pytest.fixture(autouse=True)
def strict(tmp_path_factory, monkeypatch):
    path = str(tmp_path_factory.getbasetemp() / "regressions-cache")
    monkeypatch.setattr(kiln.config, "cache_dir", path)
    monkeypatch.setenv("KILN_CACHE_DIR", path)
    monkeypatch.setattr(kiln.config, "strict", True)


def _check(fn, *arrays):
    torch = need_torch()
    t_in = [torch.from_numpy(np.array(a, copy=True)) for a in arrays]
    want = fn(torch, *t_in)
    want = list(want) if isinstance(want, tuple) else [want]
    for backend in ("eager", "inductor"):
        k_in = [kiln.from_numpy(np.array(a, copy=True)) for a in arrays]
        kiln.compiler.reset()
        got = kiln.compile(lambda *xs: fn(kiln, *xs), backend=backend)(*k_in)
        got = list(got) if isinstance(got, tuple) else [got]
        assert len(got) == len(want), backend
        for g, w in zip(got, want):
            assert_match(g, w)
        for k, t in zip(k_in, t_in):
            assert_match(k, t)


def test_matmul_batched_by_matrix_with_empty_inner_dim():
    # matmul's decomposition folded the batch dims with reshape(-1, k): ambiguous for k == 0.
    _check(lambda T, a, b: T.matmul(a, b), sample((2, 3, 0), "float32"), sample((0, 4), "float32"))


def test_matmul_batched_by_vector_with_empty_inner_dim():
    _check(lambda T, a, b: T.matmul(a, b) + 1, sample((2, 3, 0), "float32"), sample((0,), "float32"))


def test_in_place_write_into_an_empty_view():
    # A write of no elements was refused as one into overlapping memory (size-0 dims have
    # stride 0 in the index).
    def fn(T, x):
        y = x.clone()
        y[0].zero_()
        return y, x + 1

    _check(fn, sample((4, 3, 0), "float32"))


def test_in_place_add_into_an_empty_input():
    def fn(T, x, z):
        x.add_(z)
        return x * 2

    _check(fn, sample((3, 0), "float32"), sample((0,), "float32"))


@pytest.mark.parametrize("shape,dim", [((2, 0, 3), 1), ((0, 3), 0), ((3, 0), 0)])
def test_softmax_over_a_tensor_with_no_elements(shape, dim):
    # match-ranges split the softmax's normalization over the rows of its reduction, dividing
    # by the product of the zero-size extents.
    _check(lambda T, x: (T.softmax(x, dim=dim), T.nn.functional.log_softmax(x, dim=dim)),
           sample(shape, "float32"))


@pytest.mark.parametrize("dtype", ["int8", "int32", "int64"])
def test_float_to_int_to_float_has_no_negative_zero(dtype):
    # GCC folded float(int(x)) into trunc(x): -0.0 for x in (-1, 0), so 1 / y gave -inf and
    # atan2(y, 0) gave -pi where torch gives +inf and 0.
    def fn(T, x):
        y = x.to(getattr(T, dtype)).float()
        return 1 / y, T.atan2(y, y.sum() * 0), y.double()

    _check(fn, np.full((1000,), -0.5, np.float32))
    _check(fn, np.array(-0.25, np.float32))


@pytest.mark.parametrize("dtype", ["uint8", "int8", "int16", "int32"])
def test_negative_or_wide_python_scalar_into_a_narrow_integer_tensor(dtype):
    # A constant of an integer dtype was emitted unwrapped (-1 : u8), which the loop IR rejects;
    # torch wraps it to the dtype's width (255).
    def fn(T, x, m):
        return x.masked_fill(m, -1), T.where(m, x, -3), x.masked_fill(m, -128)

    _check(fn, sample((4, 5), dtype, low=0), sample((4, 5), "bool"))


def test_variance_of_a_fused_expression_over_one_element():
    # With FMA contraction, silu(x) - mean (mean == silu(x)) became fma(x, s, -mean) != 0, so
    # var/std over a size-1 dim with correction 1 came out +-inf instead of nan.
    def fn(T, x):
        y = T.nn.functional.silu(x)
        return T.var(y, dim=2), T.std(y, dim=2, correction=1), T.var(y * x, dim=0, correction=0)

    with pytest.warns(UserWarning):
        _check(fn, sample((3, 4, 1, 6), "float64"))


def test_reads_on_both_sides_of_an_in_place_write_stay_apart():
    # CSE merged the two float32 converts of x (one before x[3:] = 0, one after), so x * 1 read
    # the old values (fuzz seed 1002304).
    def fn(T, x, a, b):
        v = T.addmm(x.float(), a, b)
        x[3:] = 0
        return v, x.float() * 1

    _check(fn, sample((6, 4), "float16"), sample((6, 3), "float32"), sample((3, 4), "float32"))


def test_no_grad_block_inside_a_compiled_inference_function():
    # The grad-mode switches of `with no_grad():` were taken for eager draws (placeholders
    # without a tensor type), so the inductor gave up on the whole graph.
    def fn(x):
        y = x * 2
        with kiln.no_grad():
            z = y + 1
        return y.sum() + z.sum()

    x = kiln.randn(5)
    assert_match(kiln.compile(fn)(x), fn(x))
    assert kiln.is_grad_enabled()
    with kiln.no_grad():
        assert_match(kiln.compile(fn)(x), fn(x))
        assert not kiln.is_grad_enabled()


def test_a_graph_leaving_grad_mode_switched_compiles_and_leaves_it_switched():
    # The graph is compiled with the mode switched back at its end, and the call switches it
    # after the graph, as the function does eagerly (issue 16: a break inside `with no_grad()`).
    def fn(x):
        kiln.set_grad_enabled(False)
        return x + 1

    x = kiln.randn(3, requires_grad=True)
    try:
        out = kiln.compile(fn)(x)
        assert not kiln.is_grad_enabled()
        assert not out.requires_grad
        assert_match(out, x.detach() + 1)
    finally:
        kiln.set_grad_enabled(True)
