"""Writes through a bool mask under kiln.compile (issue 16): `x[mask] = v`, `x[mask] += v` and
index_put_ with a mask keep a static shape, so they compile as torch.compile compiles them; only
the read `x[mask]` (a data-dependent shape) breaks the graph, in both. A value that broadcasts
over the selected elements becomes where(mask, v, x); a value with one element per selected
element is index_put_ run eagerly inside the compiled graph (its meta kernel leaves the count to
the data). Values and gradients equal eager's."""
import os
import shutil

import numpy as np
import pytest

from capture_lib import get_lib

@pytest.fixture(autouse=True)
def strict(monkeypatch, tmp_path_factory):
    import kiln
    path = str(tmp_path_factory.getbasetemp() / "mask-index-cache")
    monkeypatch.setattr(kiln.config, "cache_dir", path)
    monkeypatch.setenv("KILN_CACHE_DIR", path)
    monkeypatch.setattr(kiln.config, "strict", True)


def _x(T, *shape, seed=0):
    return T.from_numpy(np.random.default_rng(seed).standard_normal(shape).astype(np.float32))


def fill_number(T, x):
    y = x.clone()
    y[y > 0.5] = 0.5
    return y * 2


def fill_tensor(T, x, t):
    y = x.clone()
    y[y > 0.5] = t
    return y * 2


def fill_other_dtype(T, x, t):
    y = x.clone()
    y[y > 0.5] = t.double()
    return y * 2


def fill_row(T, x, row):
    y = x.clone()
    y[y.sum(1) > 0] = row
    return y * 2


def fill_row_2d(T, x, row):
    y = x.clone()
    y[y.sum(1) > 0] = row[None]
    return y * 2


def fill_columns(T, x):
    y = x.clone()
    y[:, y.sum(0) > 0] = 0.0
    return y * 2


def fill_after_slice(T, x):
    v = x.clone()
    v[x.sum(dim=1) > 0, 1:3] = -2.0
    return v * 2


def put_values(T, x, vals):
    y = x.clone()
    y[x > 0] = vals
    return y * 2


def put_accumulate(T, x, t):
    y = x.clone()
    y.index_put_((y > 0,), t, accumulate=True)
    return y * 2


def read_modify_write(T, x):
    y = x.clone()
    y[y < -1.0] += 1.0
    return y * 2


def read_then_write(T, x):
    y = x.clone()
    y[y > 0] = y[y > 0] * 3
    return y * 2


# name -> (function, its arguments from (T, x), graphs, breaks): torch.compile's counts.
CASES = {
    "fill_number": (fill_number, lambda T, x: (x,), 1, 0),
    "fill_tensor": (fill_tensor, lambda T, x: (x, _x(T, seed=1)), 1, 0),
    "fill_other_dtype": (fill_other_dtype, lambda T, x: (x, _x(T, seed=1)), 1, 0),
    "fill_row": (fill_row, lambda T, x: (x, _x(T, 5, seed=2)), 1, 0),
    "fill_row_2d": (fill_row_2d, lambda T, x: (x, _x(T, 5, seed=2)), 1, 0),
    "fill_columns": (fill_columns, lambda T, x: (x,), 1, 0),
    "fill_after_slice": (fill_after_slice, lambda T, x: (x,), 1, 0),
    "put_values": (put_values, lambda T, x: (x, _x(T, int((x > 0).sum()), seed=3)), 1, 0),
    "put_accumulate": (put_accumulate, lambda T, x: (x, _x(T, seed=4)), 1, 0),
    "read_modify_write": (read_modify_write, lambda T, x: (x,), 2, 1),
    "read_then_write": (read_then_write, lambda T, x: (x,), 2, 1),
}


@pytest.mark.parametrize("libname", ["torch", "kiln"])
@pytest.mark.parametrize("name", sorted(CASES))
def test_graph_counts_match_torch(libname, name):
    L = get_lib(libname)
    L.reset()
    fn, make_args, graphs, breaks = CASES[name]
    x = _x(L.T, 6, 5)
    e = L.explain(lambda *a: fn(L.T, *a), *make_args(L.T, x))
    assert (e.graph_count, e.graph_break_count) == (graphs, breaks), [str(r)[:200] for r in e.break_reasons]
    L.reset()


def _grads(T, out, args):
    leaves = [a for a in args if a.requires_grad]
    return T.autograd.grad((out * out).sum(), leaves)


@pytest.mark.parametrize("name", sorted(CASES))
@pytest.mark.parametrize("grad", [False, True])
def test_compiled_equals_eager(name, grad):
    import kiln
    kiln.compiler.reset()
    fn, make_args, _, _ = CASES[name]
    for seed in (0, 1):
        args = make_args(kiln, _x(kiln, 6, 5, seed=seed))
        if grad:
            args = tuple(a.clone().requires_grad_() for a in args)
            body = lambda *a: fn(kiln, *(t * 1 for t in a))  # noqa: E731 (writes into non-leaves)
        else:
            body = lambda *a: fn(kiln, *a)  # noqa: E731
        want = body(*args)
        got = kiln.compile(body)(*args)
        np.testing.assert_allclose(got.detach().numpy(), want.detach().numpy(), rtol=1e-6, atol=1e-6)
        if grad:
            for g, w in zip(_grads(kiln, got, args), _grads(kiln, want, args)):
                np.testing.assert_allclose(g.numpy(), w.numpy(), rtol=1e-5, atol=1e-6)
    kiln.compiler.reset()


def test_value_count_mismatch_raises_as_eager():
    import kiln
    x = _x(kiln, 6, 5)

    def fn(x, vals):
        y = x.clone()
        y[x > 0] = vals
        return y

    wrong = _x(kiln, int((x > 0).sum()) + 1)
    with pytest.raises(RuntimeError, match="shape mismatch"):
        fn(x, wrong)
    with pytest.raises(RuntimeError, match="shape mismatch"):
        kiln.compile(fn)(x, wrong)
    kiln.compiler.reset()


def test_value_shape_that_cannot_broadcast_raises_under_capture():
    import kiln

    def fn(x, vals):
        y = x.clone()
        y[x > 0] = vals
        return y

    x, vals = _x(kiln, 6, 5), _x(kiln, 3, 7)
    with pytest.raises(RuntimeError, match="shape mismatch"):
        fn(x, vals)
    with pytest.raises(RuntimeError, match="shape mismatch"):
        kiln.compile(fn)(x, vals)
    kiln.compiler.reset()


def adv_index_write(T, x, idx, vals):
    """test/programs/adv_index_write.py's function: kiln made 3 graphs / 2 breaks of it, the
    write `y[y < -1] += 1` breaking a second time after its read (torch.compile: 2 / 1)."""
    y = x.clone()
    mask = y > 0.5
    y[mask] = 0.5
    y[y < -1.0] += 1.0
    z = x * 2
    z[z.abs() < 0.1] = vals.sum()
    w = T.zeros(8, 5)
    w[idx] += x[: idx.shape[0]]
    w.index_put_((idx,), T.ones(idx.shape[0], 5), accumulate=True)
    u = T.zeros(8, 5).index_add_(0, idx, x[: idx.shape[0]] * 3)
    row_mask = x.sum(dim=1) > 0
    v = x.clone()
    v[row_mask, 1:3] = -2.0
    return y, z, w, u, v


@pytest.mark.parametrize("libname", ["torch", "kiln"])
def test_adv_index_write_counts(libname):
    L = get_lib(libname)
    L.reset()
    r = np.random.default_rng(73)
    args = (L.T.from_numpy(r.standard_normal((8, 5)).astype(np.float32)),
            L.T.from_numpy(r.integers(0, 8, 6).astype(np.int64)),
            L.T.from_numpy(r.standard_normal(3).astype(np.float32)))
    e = L.explain(lambda *a: adv_index_write(L.T, *a), *args)
    assert (e.graph_count, e.graph_break_count) == (2, 1)
    if L.is_kiln:
        assert "data-dependent" in str(e.break_reasons[0])
        compiled = L.T.compile(lambda *a: adv_index_write(L.T, *a))
        for g, w in zip(compiled(*args), adv_index_write(L.T, *args)):
            np.testing.assert_allclose(g.numpy(), w.numpy(), rtol=1e-6, atol=1e-6)
    L.reset()


pytestmark = pytest.mark.skipif(shutil.which(os.environ.get("KILN_CXX", "c++")) is None,
                                reason="no C++ compiler")
