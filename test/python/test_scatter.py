"""scatter, scatter_add, scatter_reduce, index_add/copy/fill, masked_select/scatter, take/put,
nonzero and where(condition): differential tests against PyTorch (values, dtypes, shapes,
non-contiguous inputs, errors)."""
import kiln
import numpy as np
import pytest
from index_helpers import check, idx, make, meta_shape, run, same_error, torch
from oracle import sample

DTYPES = ["bool", "uint8", "int32", "int64", "float16", "bfloat16", "float64"]
LAYOUTS = ["contiguous", "transposed", "sliced"]
# An index into dim 0 of a [3, 4] tensor with repeats (the last write wins, sums run in order).
I24 = [[2, 0, 1, 2], [0, 0, 2, 1]]


@pytest.mark.parametrize("dtype", DTYPES)
def test_scatter_family_dtypes(dtype):
    x, src = make(sample((3, 4), dtype), dtype), make(sample((2, 4), dtype, seed=1), dtype)
    i = idx(I24)
    value = True if dtype == "bool" else 3
    run(lambda T, a, ix, s: a.scatter(0, ix, s), x, i, src)
    run(lambda T, a, ix: T.scatter(a, 0, ix, value), x, i)
    run(lambda T, a, ix, s: a.scatter_add(0, ix, s), x, i, src)
    run(lambda T, a, ix, s: T.scatter_add(a, 1, ix[:, :3], s), x, i, src)
    run(lambda T, a, ix, s: a.clone().scatter_(0, ix, s), x, i, src)
    run(lambda T, a, ix, s: a.clone().scatter_add_(0, ix, s), x, i, src)
    run(lambda T, a, ix: a.clone().scatter_(1, ix, value), x, i)


@pytest.mark.parametrize("layout", LAYOUTS)
def test_scatter_shapes_and_layouts(layout):
    x = make(sample((3, 4), "float32"), layout=layout)
    src = make(sample((4, 5), "float32", seed=2), layout=layout)
    run(lambda T, a, s: a.scatter(0, T.tensor(I24), s), x, src)
    run(lambda T, a, s: a.scatter(-1, T.tensor([[3, 1], [0, 0], [2, 2]]), s), x, src)
    run(lambda T, a, s: a.scatter_add(1, T.tensor([[3], [1]], dtype=T.int32), s), x, src)
    run(lambda T, a, s: a.scatter_add(0, T.tensor(I24).T[:2], s), x, src)  # non-contiguous index
    run(lambda T, a, s: a.scatter(0, T.zeros(0, 4, dtype=T.int64), s), x, src)
    run(lambda T, a, s: a.scatter(0, T.zeros(0, 9, dtype=T.int64), s), x, src)  # empty: no checks
    s0 = make(np.array(2.5, np.float32))
    run(lambda T, a: a.scatter(0, T.tensor(0), 7.0), s0)
    run(lambda T, a: a.scatter(0, T.tensor([0]), T.tensor([4.0])), s0)
    run(lambda T, a: a.scatter_add(0, T.tensor([0, 0]), T.tensor([4.0, 1.0])), s0)


def test_scatter_in_place_returns_self_and_bumps_version():
    k = kiln.zeros(3, 4)
    before = k._version
    assert k.scatter_(0, kiln.tensor(I24), 1.0) is k
    assert k._version > before
    view = k[1]
    k.scatter_add_(0, kiln.tensor([[1, 1, 1, 1]]), kiln.ones(1, 4))
    assert view.tolist() == [1.0, 1.0, 2.0, 2.0]


@pytest.mark.parametrize("reduce", ["sum", "prod", "mean", "amax", "amin"])
@pytest.mark.parametrize("include_self", [True, False])
@pytest.mark.parametrize("dtype", ["float32", "int64", "float16"])
def test_scatter_reduce(reduce, include_self, dtype):
    x, src = make(sample((3, 4), dtype), dtype), make(sample((2, 4), dtype, seed=3), dtype)
    i = idx(I24)
    tol = {"rtol": 1e-2, "atol": 1e-2} if dtype == "float16" else {}
    run(lambda T, a, ix, s: a.scatter_reduce(0, ix, s, reduce, include_self=include_self), x, i, src, **tol)
    run(lambda T, a, ix, s: a.clone().scatter_reduce_(1, ix, s, reduce, include_self=include_self),
        x, i, src, **tol)


def test_scatter_reduce_nan_and_negative_mean():
    x = make(np.array([1.0, 2.0, 3.0], np.float32))
    src = make(np.array([np.nan, 5.0, -1.0], np.float32))
    for reduce in ["amax", "amin", "sum"]:
        run(lambda T, a, s, r=reduce: a.scatter_reduce(0, T.tensor([1, 1, 2]), s, r), x, src)
    xi = make(np.zeros(3, np.int64))
    run(lambda T, a: a.scatter_reduce(0, T.tensor([1, 1]), T.tensor([-2, -3]), "mean",
                                      include_self=False), xi)


@pytest.mark.filterwarnings("ignore::UserWarning")  # PyTorch deprecates reduce= with a src tensor
@pytest.mark.parametrize("reduce", ["add", "multiply"])
def test_scatter_reduce_argument(reduce):
    x, src = make(sample((3, 4), "float64")), make(sample((2, 4), "float64", seed=4))
    run(lambda T, a, s: a.scatter(0, T.tensor(I24), s, reduce=reduce), x, src)
    run(lambda T, a: a.scatter(1, T.tensor(I24), 1.5, reduce=reduce), x)
    run(lambda T, a, s: a.clone().scatter_(0, T.tensor(I24), s, reduce=reduce), x, src)


@pytest.mark.filterwarnings("ignore::UserWarning")
def test_scatter_errors():
    x = make(np.zeros((3, 4), np.float32))
    for fn in [
        lambda T, a: a.scatter(0, T.tensor([[5]]), 1.0),
        lambda T, a: a.scatter(0, T.tensor([[-1]]), 1.0),
        lambda T, a: a.scatter(2, T.tensor([[0]]), 1.0),
        lambda T, a: a.scatter(0, T.tensor([[1]], dtype=T.int16), 1.0),
        lambda T, a: a.scatter(0, T.tensor([[1.0]]), 1.0),
        lambda T, a: a.scatter(0, T.tensor([[1]]), T.ones(1, 1, dtype=T.float64)),
        lambda T, a: a.scatter(0, T.tensor([1]), 1.0),
        lambda T, a: a.scatter(0, T.zeros(4, 5, dtype=T.int64), T.ones(4, 5)),
        lambda T, a: a.scatter(0, T.zeros(2, 3, dtype=T.int64), T.ones(1, 5)),
        lambda T, a: a.scatter(0, T.zeros(2, 3, dtype=T.int64), T.ones(2, 3, 1)),
        lambda T, a: a.scatter(0, T.zeros(2, 3, dtype=T.int64), T.ones(2, 3), reduce="foo"),
        lambda T, a: a.scatter_add(0, T.tensor([[3]]), T.ones(1, 1)),
        lambda T, a: a.scatter_reduce(0, T.zeros(2, 3, dtype=T.int64), T.ones(2, 3), "foo"),
        lambda T, a: a.bool().scatter_reduce(0, T.zeros(1, 1, dtype=T.int64),
                                             T.ones(1, 1, dtype=T.bool), "mean"),
    ]:
        same_error(fn, x)
    err = same_error(lambda T, a: a.scatter_add(1, T.tensor([[7]]), T.ones(1, 1)), x)
    assert "index 7 is out of bounds for dimension 1 with size 4" in str(err)


def test_scatter_add_large_parallel():
    # Above the parallel threshold, along both dims; sums with repeated indices must be exact.
    r = np.random.default_rng(0)
    for dim, ishape in [(0, (400, 300)), (1, (300, 400))]:
        x = make(np.zeros((300, 300), np.float64))
        src = make(r.standard_normal(ishape))
        i = make(r.integers(0, 300, ishape))
        run(lambda T, a, ix, s, d=dim: a.scatter_add(d, ix[:300, :300], s), x, i, src)
    x = make(np.zeros(1000, np.float32))
    i = make(r.integers(0, 1000, 100_000))
    src = make(r.standard_normal(100_000).astype(np.float32))
    run(lambda T, a, ix, s: a.scatter_add(0, ix, s), x, i, src, rtol=1e-5, atol=1e-4)


def test_scatter_meta_shapes():
    meta_shape(lambda T, a: a.scatter(0, T.zeros(2, 4, dtype=T.int64, device=a.device), 1.0), (3, 4))
    meta_shape(lambda T, a: a.scatter_add(1, T.zeros(2, 2, dtype=T.int64, device=a.device),
                                          T.zeros(3, 4, device=a.device)), (3, 4))


# --- index_add / index_copy / index_fill ---------------------------------------------------------


@pytest.mark.parametrize("dtype", DTYPES)
def test_index_add_copy_fill_dtypes(dtype):
    x = make(sample((4, 3), dtype), dtype)
    src = make(sample((3, 3), dtype, seed=5), dtype)
    i = idx([2, 0, 2])
    # PyTorch adds repeated rows of a 2-d self in another order: 16-bit sums may differ by an ulp.
    tol = {"rtol": 1e-2, "atol": 1e-2} if dtype in ("float16", "bfloat16") else {}
    run(lambda T, a, ix, s: a.index_add(0, ix, s), x, i, src, **tol)
    run(lambda T, a, ix, s: T.index_add(a, 1, ix[:2] // 2, s[:, :2].repeat(2, 1)[:4]), x, i, src)
    run(lambda T, a, ix, s: a.index_copy(0, T.tensor([3, 0, 1]), s), x, i, src)
    run(lambda T, a, ix: a.index_fill(1, T.tensor([2, -3]), True if dtype == "bool" else 7), x, i)
    run(lambda T, a, ix: a.index_fill(0, ix, T.tensor(1).to(a.dtype)), x, i)
    run(lambda T, a, ix, s: a.clone().index_add_(0, ix, s), x, i, src, **tol)
    run(lambda T, a, ix, s: a.clone().index_copy_(0, T.tensor([3, 0, 1]), s), x, i, src)
    run(lambda T, a, ix: a.clone().index_fill_(0, ix, 0), x, i)


@pytest.mark.parametrize("layout", LAYOUTS)
def test_index_add_copy_fill_shapes(layout):
    x = make(sample((3, 4), "float32"), layout=layout)
    src = make(sample((3, 2), "float32", seed=6), layout=layout)
    run(lambda T, a, s: a.index_add(1, T.tensor([3, 3]), s, alpha=-2.5), x, src)
    run(lambda T, a, s: a.index_add(1, T.tensor([1, 0], dtype=T.int32), s), x, src)
    run(lambda T, a, s: a.index_copy(-1, T.tensor([0, 2]), s), x, src)
    run(lambda T, a, s: a.index_fill(-1, T.tensor(2), -1.5), x, src)
    run(lambda T, a, s: a.index_add(0, T.tensor([], dtype=T.int64), s[:0].T[:0].reshape(0, 4)), x, src)
    s0 = make(np.array(2.0, np.float32))
    run(lambda T, a: a.index_add(0, T.tensor(0), T.tensor(5.0)), s0)
    run(lambda T, a: a.index_fill(0, T.tensor(0), 9.0), s0)
    run(lambda T, a: a.index_copy(0, T.tensor([0]), T.tensor(3.0)), s0)
    xi = make(np.zeros((3, 4), np.int64))
    run(lambda T, a: a.index_add(0, T.tensor([1]), T.ones(1, 4, dtype=T.int64), alpha=3), xi)
    run(lambda T, a: a.index_fill(1, T.tensor([2, 1]), 2.5), xi)


def test_index_add_alpha_keeps_self_dtype():
    # Regression: alpha times a bool (or integer) source was promoted and read as self's dtype.
    x = make(sample((4, 3), "bool"))
    src = make(sample((3, 3), "bool", seed=5))
    run(lambda T, a, s: a.index_add(0, T.tensor([2, 0, 2]), s, alpha=2), x, src)
    xi = make(sample((4, 3), "int16"))
    run(lambda T, a: a.index_add(1, T.tensor([0, 2]), T.ones(4, 2, dtype=T.int16), alpha=-3), xi)


def test_index_add_copy_fill_errors():
    x = make(np.zeros((3, 4), np.float32))
    for fn in [
        lambda T, a: a.index_add(0, T.tensor([5]), T.ones(1, 4)),
        lambda T, a: a.index_add(0, T.tensor([-1]), T.ones(1, 4)),
        lambda T, a: a.index_add(0, T.tensor([1]), T.ones(2, 4)),
        lambda T, a: a.index_add(0, T.tensor([1.0]), T.ones(1, 4)),
        lambda T, a: a.index_add(0, T.tensor([1]), T.ones(1, 4, dtype=T.float64)),
        lambda T, a: a.index_add(0, T.tensor([[1]]), T.ones(1, 4)),
        lambda T, a: a.index_copy(0, T.tensor([5]), T.ones(1, 4)),
        lambda T, a: a.index_copy(0, T.tensor([-1]), T.ones(1, 4)),
        lambda T, a: a.index_copy(0, T.tensor([1], dtype=T.int32), T.ones(1, 4)),
        lambda T, a: a.index_copy(0, T.tensor([1]), T.ones(1, 4, dtype=T.float64)),
        lambda T, a: a.index_fill(0, T.tensor([5]), 1.0),
        lambda T, a: a.index_fill(0, T.tensor([-4]), 1.0),
        lambda T, a: a.index_fill(0, T.tensor([1], dtype=T.int32), 1.0),
        lambda T, a: a.index_fill(1, T.tensor([2]), T.tensor([2.0])),
        lambda T, a: a.index_fill(2, T.tensor([0]), 1.0),
    ]:
        same_error(fn, x)


def test_index_add_meta_shape():
    meta_shape(lambda T, a: a.index_add(1, T.zeros(2, dtype=T.int64, device=a.device),
                                        T.zeros(3, 2, device=a.device)), (3, 4))


# --- masked_select / masked_scatter -----------------------------------------------------------


@pytest.mark.parametrize("dtype", DTYPES)
def test_masked_select_scatter_dtypes(dtype):
    x = make(sample((3, 4), dtype), dtype)
    m = make(sample((3, 4), "bool", seed=7))
    src = make(sample((12,), dtype, seed=8), dtype)
    run(lambda T, a, mm: a.masked_select(mm), x, m)
    run(lambda T, a, mm, s: a.masked_scatter(mm, s), x, m, src)
    run(lambda T, a, mm, s: a.clone().masked_scatter_(mm, s.reshape(3, 4)), x, m, src)


@pytest.mark.parametrize("layout", LAYOUTS)
def test_masked_select_scatter_broadcast(layout):
    x = make(sample((3, 4), "float32"), layout=layout)
    m = make(sample((2, 1, 4), "bool", seed=9))
    src = make(np.arange(40, dtype=np.float32))
    run(lambda T, a, mm: T.masked_select(a, mm), x, m)
    run(lambda T, a, mm: a.masked_select(mm[0, 0]), x, m)
    run(lambda T, a, mm, s: a.masked_scatter(mm, s), x, m, src)
    run(lambda T, a, mm, s: a.clone().masked_scatter_(mm[1, 0], s), x, m, src)
    run(lambda T, a, mm: a[:0].masked_select(mm[0]), x, m)


def test_masked_select_scatter_errors():
    x = make(np.zeros((2, 3), np.float32))
    for fn in [
        lambda T, a: a.masked_select(T.ones(2, 3)),
        lambda T, a: a.masked_select(T.tensor([1, 0, 1], dtype=T.uint8)),
        lambda T, a: a.masked_select(T.ones(3, 3, dtype=T.bool)),
        lambda T, a: a.masked_scatter(T.ones(2, 3, dtype=T.bool), T.ones(5)),
        lambda T, a: a.masked_scatter(T.ones(2, 3, dtype=T.bool), T.ones(6, dtype=T.float64)),
        lambda T, a: a[0].masked_scatter_(T.ones(2, 3, dtype=T.bool), T.ones(6)),
    ]:
        same_error(fn, x)


# --- take / put --------------------------------------------------------------------------------


@pytest.mark.parametrize("dtype", ["bool", "int32", "float16", "float64"])
def test_take_put(dtype):
    x = make(sample((3, 4), dtype), dtype, layout="contiguous")
    xt = make(sample((4, 3), dtype), dtype, layout="transposed")
    src = make(sample((2, 2), dtype, seed=10), dtype)
    i = idx([[0, -1], [11, 5]])
    run(lambda T, a, ix: a.take(ix), x, i)
    run(lambda T, a, ix: T.take(a, ix), xt, i)
    run(lambda T, a, ix, s: a.put(ix, s), x, i, src)
    run(lambda T, a, ix, s: a.clone().put_(ix, s), xt, i, src)
    if dtype != "bool":
        run(lambda T, a, s: a.put(T.tensor([1, 1, -11, 0]), s, accumulate=True), x, src)


def test_take_put_errors():
    x = make(np.zeros((3, 4), np.float32))
    for fn in [
        lambda T, a: a.take(T.tensor([12])),
        lambda T, a: a.take(T.tensor([-13])),
        lambda T, a: a.take(T.tensor([1], dtype=T.int32)),
        lambda T, a: a.put(T.tensor([12]), T.ones(1)),
        lambda T, a: a.put(T.tensor([1, 2]), T.ones(1)),
        lambda T, a: a.put(T.tensor([1]), T.ones(1, dtype=T.float64)),
    ]:
        same_error(fn, x)
    err = same_error(lambda T, a: a.take(T.tensor([12])), x)
    assert "index 12 on a tensor of 12 elements" in str(err)


# --- nonzero / argwhere / where(condition) ---------------------------------------------------


@pytest.mark.parametrize("dtype", ["bool", "uint8", "int64", "float16", "float32"])
def test_nonzero(dtype):
    a = sample((3, 4, 2), dtype)
    if dtype.startswith("float"):
        a[0, 0, 0], a[1, 1, 1], a[2, 0, 1] = np.nan, -0.0, 0.0
    x = make(a, dtype)
    run(lambda T, t: t.nonzero(), x)
    run(lambda T, t: T.nonzero(t), x)
    run(lambda T, t: T.argwhere(t), x)
    run(lambda T, t: t.nonzero(as_tuple=True), x)
    run(lambda T, t: T.nonzero(t, as_tuple=True), x)
    run(lambda T, t: T.where(t), x)
    run(lambda T, t: t.transpose(0, 2).nonzero(), x)


def test_nonzero_edge_shapes():
    for a in [np.array(3.0, np.float32), np.array(0, np.int64), np.zeros((0, 3), np.float32),
              np.zeros((2, 3), np.bool_)]:
        x = make(a)
        run(lambda T, t: t.nonzero(), x)
        run(lambda T, t: T.where(t), x)
        run(lambda T, t: t.nonzero(as_tuple=True), x)


# --- in-place cumulative scans -------------------------------------------------------------------


def test_cumsum_cumprod_in_place():
    x = make(sample((3, 4), "float32", low=-2, high=2))
    run(lambda T, a: a.clone().cumsum_(1), x)
    run(lambda T, a: a.clone().cumprod_(0), x)
    run(lambda T, a: a.clone().cumsum_(0, dtype=T.float32), x)
    run(lambda T, a: a.int().cumsum_(0), x)
    k = kiln.ones(3)
    assert k.cumsum_(0) is k and k.tolist() == [1.0, 2.0, 3.0]
    same_error(lambda T, a: a.clone().cumsum_(0, dtype=T.float64), x)
    same_error(lambda T, a: a.clone().cumprod_(1, dtype=T.int64), x)


# --- gather / index_select fast paths ---------------------------------------------------------


@pytest.mark.parametrize("dtype", ["bool", "float16", "int64"])
def test_gather_lines_and_index_select_blocks(dtype):
    # gather with a multi-dim index walks lines along dim; index_select of a contiguous self copies
    # whole rows of at least 8 elements.
    x = make(sample((5, 4, 9), dtype), dtype)
    r = np.random.default_rng(4)
    run(lambda T, a, i: a.gather(0, i), x, make(r.integers(0, 5, (7, 3, 9))))
    run(lambda T, a, i: a.gather(2, i), x, make(r.integers(0, 9, (5, 2, 11))))
    run(lambda T, a, i: a.transpose(0, 2).gather(1, i.transpose(0, 2)), x, make(r.integers(0, 4, (3, 4, 9))))
    run(lambda T, a, i: a.index_select(0, i), x, make(np.array([4, 0, 4, 2])))
    run(lambda T, a, i: a.index_select(1, i), x, make(np.array([3, 3, 0], np.int32)))
    run(lambda T, a, i: a.reshape(20, 9).index_select(0, i), x, make(r.integers(0, 20, 50)))
