"""GEMM epilogues (passes/loop/FuseGemmEpilogue.h): the pointwise chain after an mm (bias,
activation, residual add) runs as the GEMM's post-ops in one oneDNN matmul call, and equals kiln
eager; epilogues that are no such chain stay a loop nest after the GEMM."""
import math

import numpy as np
import pytest

import kiln
from conftest import needs_cxx

pytestmark = [needs_cxx, pytest.mark.usefixtures("strict_inductor")]
F = kiln.nn.functional


def _rand(*shape, seed=0):
    return kiln.from_numpy(np.random.default_rng(seed).standard_normal(shape).astype(np.float32))


def _fused_kernels(fn, args):
    """The names of the kernels that took an mm in, from kiln.explain."""
    with kiln.no_grad():
        plan = kiln.explain(fn)(*args).kernels_per_graph[0]
    return [name for name, members in plan.kernels if any(kind == "mm" for _, kind in members)]


X, W, B, R = _rand(24, 40, seed=1), _rand(72, 40, seed=2), _rand(72, seed=3), _rand(24, 72, seed=4)
EPILOGUES = {
    "bias_gelu": lambda x, w, b, r: F.gelu(F.linear(x, w, b)),
    "bias_gelu_tanh": lambda x, w, b, r: F.gelu(F.linear(x, w, b), approximate="tanh"),
    "bias_gelu_residual": lambda x, w, b, r: F.gelu(F.linear(x, w, b)) + r,
    "silu": lambda x, w, b, r: F.silu(x @ w.t()),
    "sigmoid_gate": lambda x, w, b, r: kiln.sigmoid(x @ w.t()) * r,
    "tanh_minus": lambda x, w, b, r: kiln.tanh(x @ w.t() + b) - r,
    "reversed_sub": lambda x, w, b, r: r - (x @ w.t()),
    "scaled_plus_bias": lambda x, w, b, r: (x @ w.t()) * 0.5 + b,
    "exp_abs_sqrt": lambda x, w, b, r: kiln.sqrt(kiln.abs(kiln.exp((x @ w.t()) * 0.1))),
    "div_by_tensor": lambda x, w, b, r: (x @ w.t()) / r,
}


@pytest.mark.parametrize("name", sorted(EPILOGUES))
def test_epilogue_runs_as_post_ops_and_equals_eager(name):
    fn = EPILOGUES[name]
    args = (X, W, B, R)
    assert _fused_kernels(fn, args), f"{name}: the mm was not fused with its epilogue"
    with kiln.no_grad():
        got = kiln.compile(fn)(*args)
        want = fn(*args)
    np.testing.assert_allclose(got.numpy(), want.numpy(), rtol=2e-5, atol=2e-5)


@pytest.mark.parametrize("fn", [
    lambda x, w, b, r: (x @ w.t()) ** 2,             # the product used twice
    lambda x, w, b, r: (x @ w.t()) / 3.0,            # v / c rounds unlike v * (1 / c)
    lambda x, w, b, r: (x @ w.t()) * 2.0 + 1.0,      # two linear steps (oneDNN 2.6 mixes them up)
    lambda x, w, b, r: kiln.erf(x @ w.t()),          # no such post-op
    lambda x, w, b, r: F.relu(F.linear(x, w, b)),    # oneDNN's relu turns NaN into 0
    lambda x, w, b, r: kiln.maximum(x @ w.t(), r),   # and so does its max
], ids=["square", "div_const", "two_linear", "erf", "relu", "maximum"])
def test_other_epilogues_stay_loop_nests(fn):
    args = (X, W, B, R)
    assert _fused_kernels(fn, args) == []
    with kiln.no_grad():
        got = kiln.compile(fn)(*args)
        want = fn(*args)
    np.testing.assert_allclose(got.numpy(), want.numpy(), rtol=1e-5, atol=1e-5)


@pytest.mark.parametrize("name", ["bias_gelu", "bias_gelu_tanh", "silu", "sigmoid_gate", "tanh_minus"])
def test_nan_and_inf_flow_through_the_post_ops(name):
    x = _rand(8, 40, seed=5)
    x[0, 0] = float("nan")
    x[1, :] = float("inf")
    x[2, :] = -float("inf")
    fn = EPILOGUES[name]
    args = (x, W, B, R[:8])
    assert _fused_kernels(fn, args)
    with kiln.no_grad():
        got = kiln.compile(fn)(*args).numpy()
        want = fn(*args).numpy()
    np.testing.assert_array_equal(np.isnan(got), np.isnan(want))
    np.testing.assert_array_equal(np.isinf(got), np.isinf(want))
    finite = np.isfinite(want)
    np.testing.assert_allclose(got[finite], want[finite], rtol=2e-5, atol=2e-5)


def test_mlp_block_with_strided_residual_and_small_batch():
    # The residual is a column slice of a wider tensor (row stride 2n) and the batch has one row:
    # the binary post-op reads it at its own strides.
    wide = _rand(1, 144, seed=6)
    fn = lambda x, w, b, r: F.gelu(F.linear(x, w, b)) + r[:, :72]  # noqa: E731
    args = (X[:1], W, B, wide)
    assert _fused_kernels(fn, args)
    with kiln.no_grad():
        got = kiln.compile(fn)(*args)
        want = fn(*args)
    np.testing.assert_allclose(got.numpy(), want.numpy(), rtol=2e-5, atol=2e-5)


def test_gelu_post_op_matches_the_erf_formula():
    # The oneDNN GELU against the definition, in float64, over a wide range of inputs.
    x = kiln.from_numpy(np.linspace(-12, 12, 4096, dtype=np.float32).reshape(64, 64))
    eye = kiln.from_numpy(np.eye(64, dtype=np.float32))
    fn = lambda x, e: F.gelu(x @ e)  # noqa: E731
    assert _fused_kernels(fn, (x, eye))
    with kiln.no_grad():
        got = kiln.compile(fn)(x, eye).numpy().astype(np.float64)
    v = x.numpy().astype(np.float64)
    want = 0.5 * v * (1 + np.vectorize(math.erf)(v / math.sqrt(2)))
    np.testing.assert_allclose(got, want, rtol=1e-5, atol=1e-6)


@pytest.mark.parametrize("m,k,n", [(256, 96, 320), (8, 128, 1000), (67, 33, 517)],
                         ids=["row_blocks", "column_blocks", "ragged"])
@pytest.mark.parametrize("name", ["bias_gelu_residual", "bias_gelu_tanh", "sigmoid_gate"])
def test_threaded_blocks_with_post_ops_equal_eager(m, k, n, name):
    # Large enough for two threads: without brgemm (no AVX-512) each thread runs one GEMM on its
    # block of rows (or of columns, for a short batch) and the post-ops on it; the residual is a
    # strided column slice.
    x, w, b = _rand(m, k, seed=7), _rand(n, k, seed=8), _rand(n, seed=9)
    r = _rand(m, n + 5, seed=10)[:, :n]
    fn = EPILOGUES[name]
    saved = kiln.get_num_threads()
    kiln.set_num_threads(2)
    try:
        assert _fused_kernels(fn, (x, w, b, r))
        with kiln.no_grad():
            got = kiln.compile(fn)(x, w, b, r)
            want = fn(x, w, b, r)
    finally:
        kiln.set_num_threads(saved)
    np.testing.assert_allclose(got.numpy(), want.numpy(), rtol=2e-5, atol=2e-5)
