"""In-place writes in the inductor backend (prims.copy_to lowered to loop buffers written
`into` existing storage), differential against torch eager and kiln's eager backend: the
outputs and every input after the call (writes into inputs must reach the caller)."""
import os
import shutil

import numpy as np
import pytest

import kiln
from kiln._C import _codegen
from oracle import assert_match, need_torch, sample

pytestmark = pytest.mark.skipif(shutil.which(os.environ.get("KILN_CXX", "c++")) is None,
                                reason="no C++ compiler")


@pytest.fixture(autouse=True)
def strict(tmp_path_factory, monkeypatch):
    # Strict: a graph the backend cannot compile raises instead of running eagerly.
    path = str(tmp_path_factory.getbasetemp() / "mutation-cache")
    monkeypatch.setattr(kiln.config, "cache_dir", path)
    monkeypatch.setenv("KILN_CACHE_DIR", path)
    monkeypatch.setattr(kiln.config, "strict", True)


def _check(fn, *arrays, transpose=()):
    """fn on torch eager, kiln eager and kiln inductor, each on fresh copies of `arrays` (those
    at the positions in `transpose` passed as transposed views): the outputs and the inputs
    afterwards match torch's."""
    torch = need_torch()

    def inputs(make):
        out = []
        for i, a in enumerate(arrays):
            if i in transpose:
                out.append(make(np.ascontiguousarray(a.T)).t())
            else:
                out.append(make(np.array(a, copy=True)))
        return out

    t_in = inputs(torch.from_numpy)
    want = fn(*t_in)
    want = list(want) if isinstance(want, tuple) else [want]
    for backend in ("eager", "inductor"):
        k_in = inputs(kiln.from_numpy)
        kiln.compiler.reset()  # compiled graphs are cached per code object, across backends
        got = kiln.compile(fn, backend=backend)(*k_in)
        got = list(got) if isinstance(got, tuple) else [got]
        assert len(got) == len(want), backend
        for g, w in zip(got, want):
            assert_match(g, w)
        for k, t in zip(k_in, t_in):
            assert_match(k, t)


@pytest.mark.parametrize("dtype", ["float32", "float64", "int64"])
def test_add_mul_chain_on_a_clone(dtype):
    def fn(x):
        y = x.clone()
        y.add_(1).mul_(2)
        return y, x + 1

    _check(fn, sample((6, 5), dtype))


def test_write_a_row_of_an_intermediate():
    def fn(x):
        y = x * 3.0
        y[0] = 0.0
        return y, y.sum(dim=0)

    _check(fn, sample((6, 5), "float32"))


def test_augmented_assignment_into_a_slice():
    def fn(x):
        y = x.clone()
        y[:, 1:3] += 1
        return y

    _check(fn, sample((4, 6), "float32"))


def test_in_place_through_a_transpose():
    def fn(x, z):
        y = x.clone()
        y.t().add_(z)
        return y

    _check(fn, sample((3, 5), "float32"), sample((5, 3), "float32", seed=1))


def test_write_into_an_input():
    def fn(x, b):
        x.add_(b)
        return x * 2.0

    _check(fn, sample((4, 5), "float32"), sample((5,), "float32", seed=1))


def test_write_into_a_strided_input():
    def fn(x):
        x.mul_(2.0)
        return x.sum(dim=1)

    _check(fn, sample((4, 5), "float32"), transpose=(0,))


def test_write_into_a_view_of_an_input():
    def fn(x):
        x[:, 0] = 5.0
        x.t()[1].add_(1.0)
        return x.sum()

    _check(fn, sample((4, 3), "float32"))


def test_view_output_over_a_mutated_input_aliases_it():
    def fn(x):
        x.add_(1.0)
        return x.t(), x

    torch = need_torch()
    _check(fn, sample((3, 4), "float32"))
    x = kiln.from_numpy(sample((3, 4), "float32"))
    kiln.compiler.reset()
    xt, same = kiln.compile(fn, backend="inductor")(x)
    x.mul_(0.0)  # the outputs are views of x, as eagerly
    assert float(xt.abs().sum()) == 0.0 and float(same.abs().sum()) == 0.0
    del torch


def test_read_of_the_old_value_before_the_write():
    def fn(x):
        a = x * 2
        x.add_(1)
        return a, x

    _check(fn, sample((5, 4), "float32"))


def test_views_of_an_intermediate_see_later_writes():
    def fn(x):
        y = x.clone()
        v = y[1:]
        before = v * 1.0
        y.mul_(2.0)
        return v + 0.0, before, y

    _check(fn, sample((4, 3), "float32"))


def test_index_put_through_select_of_select():
    def fn(x):
        y = x.clone()
        y[1][2] = 7.0
        y[0][1][0] = -1.0
        return y

    _check(fn, sample((2, 3, 4), "float32"))


@pytest.mark.parametrize("src", ["int32", "float64", "bool"])
def test_copy_casts_to_the_destination_dtype(src):
    def fn(x, i):
        y = x.clone()
        y.copy_(i)
        return y

    _check(fn, sample((3, 4), "float32"), sample((3, 4), src, seed=1))


def test_copy_broadcasts_the_source():
    def fn(x, r):
        y = x.clone()
        y.copy_(r)
        return y

    _check(fn, sample((3, 4), "float32"), sample((4,), "float32", seed=1))


def test_source_reading_other_elements_of_the_destination():
    # flip makes a new tensor eagerly; the compiled write must not see its own updates.
    def fn(x):
        y = x.clone()
        y.add_(y.flip(0))
        return y

    _check(fn, sample((5, 3), "float32"))


def test_conformance_program():
    def fn(x, buf):
        y = x.clone()
        y.add_(1.0).mul_(2.0)
        y[0] = 0.0
        buf.add_(y.sum(dim=0))
        return y, buf.clone()

    _check(fn, sample((6, 5), "float32"), sample((5,), "float32", seed=1))


def test_write_into_a_broadcast_input_raises_like_eager():
    torch = need_torch()

    def fn(x):
        x.add_(1.0)
        return x

    with pytest.raises(RuntimeError, match="single memory location"):
        fn(torch.ones(3).expand(4, 3))
    for backend in ("eager", "inductor"):
        x = kiln.from_numpy(np.ones(3, dtype=np.float32)).expand(4, 3)
        kiln.compiler.reset()
        with pytest.raises(RuntimeError, match="single memory location"):
            kiln.compile(fn, backend=backend)(x)


WRITE_A_ROW = """
graph @write_a_row(%x: f32[4, 3]) {
  %y = call_function aten.mul.Tensor(%x, 2.0)
  %s = call_function aten.select.int(%y, 0, 0)
  %f = call_function aten.fill_.Scalar(%s, 0.0)
  %z = call_function aten.add.Tensor(%y, 1.0)
  output (%z,)
}
"""


def test_loop_program_writes_in_place_and_the_scheduler_keeps_it_alone():
    # The row written in place and the [4, 3] buffers around it are no single loop nest.
    from kiln import fx

    text = _codegen.lower(fx.retrace(fx.parse(WRITE_A_ROW), "prims"))
    assert "= pointwise [i0: 3] into %buf0[i0] {" in text
    program, log = _codegen.schedule(text)
    assert "kernel @k1: %buf1\n" in log and "no single loop nest: ranges [3] and [4, 3]" in log
    assert "into %buf0[i0]" in program


def test_zero_d_and_empty_inputs_written_in_place():
    def fn(s, e, x):
        s.add_(1.0)
        e.mul_(2.0)
        x[0, 0] = s
        return x * 1.0

    _check(fn, sample((), "float32"), sample((0, 3), "float32", seed=1),
           sample((2, 3), "float32", seed=2))


@pytest.mark.parametrize("dtype", ["bool", "int32", "float16"])
def test_row_write_in_other_dtypes(dtype):
    def fn(x):
        y = x.clone()
        y[1] = y[0]
        return y

    _check(fn, sample((3, 4), dtype))


def test_write_into_a_matmul_result_then_softmax():
    def fn(a, b):
        m = a @ b
        m.add_(1.0)
        m[:, 0] = 0.0
        return m, m.softmax(dim=-1)

    _check(fn, sample((4, 5), "float32"), sample((5, 6), "float32", seed=1))


def test_writes_through_two_views_of_one_input_in_order():
    def fn(x):
        r = x[0].clone()
        x[1:].mul_(2.0)
        x[:, :2] = x[:, :2] + r[:2]
        return x.sum(dim=0)

    _check(fn, sample((3, 4), "float32"))
