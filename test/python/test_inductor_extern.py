"""Extern GEMM operands and results in the inductor backend: views of inputs and buffers
(transposes, reshapes, slices) are read in place by the extern call (`view(...)` in the loop
program) instead of being copied first, and a graph output reshaping an extern's result is that
result. Values are checked against kiln eager."""
import logging

import numpy as np
import pytest

import kiln
from conftest import needs_cxx

pytestmark = [needs_cxx, pytest.mark.usefixtures("strict_inductor")]


def _rand(*shape, seed=0, dtype=np.float32):
    return kiln.from_numpy(np.random.default_rng(seed).standard_normal(shape).astype(dtype))


def _compiled_with_program(fn, args, capsys):
    """(outputs, the scheduled loop program's text) of fn compiled by inductor."""
    kiln.set_logs(loops=logging.DEBUG)
    try:
        capsys.readouterr()
        out = kiln.compile(fn, backend="inductor")(*args)
        err = capsys.readouterr().err
    finally:
        kiln.set_logs()
    return out, err[err.index("scheduled loop program:"):]


def _check(fn, args, capsys, tol=1e-5):
    got, program = _compiled_with_program(fn, args, capsys)
    want = fn(*args)
    got, want = (got, want) if isinstance(want, tuple) else ((got,), (want,))
    for g, w in zip(got, want):
        assert g.dtype == w.dtype and tuple(g.shape) == tuple(w.shape)
        np.testing.assert_allclose(g.numpy(), w.numpy(), rtol=tol, atol=tol)
    return program


def test_linear_reads_the_transposed_weight_in_place(capsys):
    w, b = _rand(16, 8, seed=1), _rand(16, seed=2)
    program = _check(lambda x: kiln.nn.functional.linear(x, w, b).relu(), (_rand(4, 8),), capsys)
    assert "view([8, 16], [1, 8], 0)" in program
    assert program.count("kernel @") == 1  # the bias + relu epilogue only: no transposing copy


@pytest.mark.parametrize("m,n,k", [(300, 200, 96), (64, 700, 130), (1024, 512, 96)])
def test_linear_with_few_rows_or_columns(m, n, k, capsys):
    # x @ W.T with M or N at most 512 runs as oneDNN's matmul primitive rather than dnnl_sgemm on
    # more than one thread (cpu::preferMatmulPrimitive): eager against numpy, compiled against eager.
    x, w = _rand(m, k), _rand(n, k, seed=1)
    want = x.numpy().astype(np.float64) @ w.numpy().astype(np.float64).T
    np.testing.assert_allclose((x @ w.t()).numpy(), want, rtol=1e-4, atol=1e-4)
    _check(lambda x, w: x @ w.t(), (x, w), capsys)


@pytest.mark.parametrize("name", ["x_xt", "slices", "offset_f64", "same_input_twice"])
def test_strided_operands(name, capsys):
    cases = {
        "x_xt": (lambda x: x @ x.t(), (_rand(5, 7),)),
        "slices": (lambda x, w: x[1:, 2:] @ w.t()[:, 1:4], (_rand(6, 9), _rand(5, 7, seed=1))),
        "offset_f64": (lambda a: a[2:, 1:] @ a[:3, :3].t(), (_rand(5, 4, dtype=np.float64),)),
        "same_input_twice": (lambda a: a[:, :3] @ a[:3, :], (_rand(3, 5),)),
    }
    fn, args = cases[name]
    program = _check(fn, args, capsys)
    assert " view(" in program


def test_batched_attention_scores_need_no_copies(capsys):
    q, k, v = _rand(2, 3, 8, 4), _rand(2, 3, 8, 4, seed=1), _rand(2, 3, 8, 4, seed=2)

    def fn(q, k, v):
        return kiln.softmax(q @ k.transpose(-2, -1), dim=-1) @ v

    program = _check(fn, (q, k, v), capsys)
    assert program.count("extern bmm(%q view(") == 1 and "%k view([6, 4, 8], [32, 1, 4], 0)" in program
    # softmax over [2, 3, 8, 8] feeding a [6, 8, 8] GEMM operand is still one kernel (match-ranges)
    assert program.count("kernel @") == 1
    # The last bmm's [6, 8, 4] result is the [2, 3, 8, 4] output itself: no copy after it.
    defs = [line.strip() for line in program.splitlines() if " = " in line and line.strip().startswith("%buf")]
    assert defs[-1].split(" = ")[0].endswith("f32[2, 3, 8, 4]") and "extern bmm" in defs[-1]


def test_heads_of_a_fused_projection_are_copied_in_the_order_they_are_stored(capsys):
    """q @ k.transpose(-2, -1) with q, k heads of one fused projection (a GPT block's c_attn):
    folding the heads into the batch needs copies; k^T is copied in k's own order (the inner
    loop contiguous on both sides) and the bmm reads the copy transposed, instead of gathering
    k^T at the projection's row stride into row-major order."""
    qkv = _rand(2, 8, 3 * 16)

    def fn(qkv):
        q, k, v = qkv.split(16, dim=2)
        q, k, v = (t.view(2, 8, 4, 4).transpose(1, 2) for t in (q, k, v))
        return kiln.softmax(q @ k.transpose(-2, -1), dim=-1) @ v

    program = _check(fn, (qkv,), capsys)
    scores = next(line for line in program.splitlines() if "extern bmm" in line)
    assert "view([8, 4, 8], [32, 1, 4], 0))" in scores, scores  # k^T over a [8, 8, 4] copy of k
    assert "48*i3]" not in program, program  # no copy's inner loop steps by a row of qkv


def test_reshaped_result_also_read_by_another_extern(capsys):
    a, b = _rand(3, 4, 3), _rand(3, 3, 3, seed=1)
    _check(lambda a, b: ((a @ b).reshape(12, 3), (a @ b).reshape(12, 3) @ b[0]), (a, b), capsys)


def test_chained_products(capsys):
    a, b = _rand(4, 5), _rand(5, 4, seed=1)
    _check(lambda a, b: (a @ b) @ (a @ b).t(), (a, b), capsys)


@pytest.mark.parametrize("dtype", [np.float32, np.float64])
def test_transposed_product_output_is_computed_transposed(dtype, capsys):
    # A linear layer's weight gradient, t(mm(t(g), x)): the GEMM writes the transposed product
    # (C^T = B^T A^T) straight into the output instead of a product and a transposing copy.
    g, x = _rand(6, 5, dtype=dtype), _rand(6, 3, seed=1, dtype=dtype)
    program = _check(lambda g, x: (g.t() @ x).t(), (g, x), capsys)
    assert "extern mm(%x view([3, 6], [1, 3], 0), %g)" in program
    assert "kernel @" not in program


def test_transposed_product_of_strided_operands(capsys):
    # Operands that are already views (a column-major input, a slice) keep their layout facts
    # when the product is transposed; a product also read elsewhere stays as it was.
    a = _rand(7, 4).t()  # [4, 7] column-major
    b = _rand(9, 5, seed=1)[2:, :]  # [7, 5] with an offset
    _check(lambda a, b: (a @ b).t(), (a, b), capsys)
    _check(lambda a, b: ((a @ b).t(), (a @ b).relu()), (a, b), capsys)


def test_transposed_product_of_a_scatter_result(capsys):
    # The GNN weight gradient: t(mm(t(x), index_put(zeros, idx, msgs, accumulate))). The
    # scatter's buffer has the messages' iteration shape [34, 12] but the zeros' storage
    # [10, 12]; the transposed operand must be a view of the storage (it read element 407 of a
    # storage of 120 and failed to compile).
    idx = kiln.from_numpy(np.random.default_rng(3).integers(0, 10, 34))
    msgs, x = _rand(34, 12), _rand(10, 5, seed=1)

    def fn(msgs, x):
        z = kiln.zeros(10, 12).index_put((idx,), msgs * 2, accumulate=True)
        return (x.t() @ z).t(), z.sum(0)  # a second reader: z goes to the GEMM unviewed

    _check(fn, (msgs, x), capsys)


def test_linear_weight_gradient_needs_no_transposing_copy(capsys):
    lin = kiln.nn.Linear(8, 16)
    x = _rand(4, 8)
    want = kiln.autograd.grad(lin(x).sum(), lin.weight)[0]
    kiln.set_logs(loops=logging.DEBUG)
    try:
        capsys.readouterr()
        compiled = kiln.compile(lambda x: lin(x).sum(), backend="inductor")
        compiled(x).backward()
        err = capsys.readouterr().err
    finally:
        kiln.set_logs()
    np.testing.assert_allclose(lin.weight.grad.numpy(), want.numpy(), rtol=1e-5, atol=1e-5)
    assert tuple(lin.weight.grad.stride()) == (8, 1)
    # The backward program's weight gradient is the GEMM's own result (forward and backward
    # compile concurrently: their logs come in either order).
    assert "f32[16, 8] = extern mm(" in err
    assert "tangents" in err


def test_parameter_that_only_keys_a_dict_is_no_program_input(capsys):
    # An optimizer's state[p] reads p as a dict key only: the unused get_attr of p must not
    # become an input of the compiled program (one pointer per parameter per call, for nothing).
    w = _rand(4, 3)
    table = {w: _rand(4, 3, seed=1)}

    def fn(x):
        return x * table[w] + 1

    program = _check(fn, (_rand(4, 3, seed=2),), capsys)
    header = program.splitlines()[1]
    assert header.count("%") == 2, header  # x and the dict's value, not w
