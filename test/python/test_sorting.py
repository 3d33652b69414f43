"""sort, argsort, msort, topk, kthvalue, median, mode, unique, bincount, searchsorted,
repeat_interleave (differential against PyTorch) and multinomial (statistical: kiln's generator
differs from PyTorch's)."""
import kiln
import numpy as np
import pytest
from index_helpers import check, make, meta_shape, run, same_error, torch
from oracle import sample

DTYPES = ["bool", "uint8", "int16", "int64", "float16", "bfloat16", "float32", "float64"]
LAYOUTS = ["contiguous", "transposed", "sliced"]


def with_nans(shape, seed=0):
    a = sample(shape, "float32", seed=seed)
    a.reshape(-1)[:: 5] = np.nan
    return a


def check_selection(k, t, kx, dim):
    """(values, indices) of a selection: values equal PyTorch's; indices point at those values
    (PyTorch leaves the order of ties open)."""
    check(k[0], t[0])
    assert k[1].dtype == kiln.int64 and tuple(k[1].shape) == tuple(t[1].shape)
    if k[1].dim() == kx.dim():
        picked = kx.gather(dim, k[1])
    else:
        picked = kx.gather(dim, k[1].unsqueeze(dim)).squeeze(dim)
    check(picked, t[0])


@pytest.mark.parametrize("dtype", DTYPES)
def test_sort_dtypes(dtype):
    # Few distinct values: many ties, which a stable sort keeps in index order.
    x = make(sample((3, 20), dtype, low=-2, high=2), dtype)
    run(lambda T, a: T.sort(a, stable=True), x)
    run(lambda T, a: a.sort(dim=0, descending=True, stable=True), x)
    run(lambda T, a: a.argsort(stable=True, descending=True), x)
    run(lambda T, a: T.msort(a), x)


@pytest.mark.parametrize("dtype", DTYPES + ["int8", "int32"])
def test_sort_long_rows(dtype):
    # Rows of 600 take the radix path: ties stay in index order, NaN last, -0 equal to 0.
    a = sample((2, 600), dtype, low=-3, high=3)
    if dtype.startswith("float") or dtype == "bfloat16":
        a = a.round()
        a[0, ::7] = np.nan
        a[1, ::5] = -0.0
    x = make(a, dtype)
    run(lambda T, t: t.sort(stable=True), x)
    run(lambda T, t: t.sort(dim=1, descending=True, stable=True), x)
    run(lambda T, t: t.T.sort(dim=0, stable=True), x)


@pytest.mark.parametrize("layout", LAYOUTS)
def test_sort_layouts_and_dims(layout):
    x = make(sample((4, 5, 6), "int32", low=-3, high=3), layout=layout)
    for dim in [0, 1, -1]:
        for desc in [False, True]:
            run(lambda T, a, d=dim, s=desc: a.sort(dim=d, descending=s, stable=True), x)
            run(lambda T, a, d=dim, s=desc: T.argsort(a, stable=True, dim=d, descending=s), x)
            run(lambda T, a, d=dim, s=desc: a.sort(d, s)[0], x)  # ties: PyTorch's order is open
    run(lambda T, a: a.sort(), make(np.array(3.0, np.float32)))
    run(lambda T, a: a.sort(0), make(np.zeros((0, 3), np.float32)))
    run(lambda T, a: a.sort(1), make(np.zeros((0, 3), np.float32)))


def test_sort_nan_order_and_large_rows():
    x = make(with_nans((6, 40)))
    run(lambda T, a: a.sort(dim=1, stable=True), x)
    run(lambda T, a: a.sort(dim=1, descending=True, stable=True), x)
    run(lambda T, a: a.sort(dim=0, stable=True), x)
    big = make(sample((300, 500), "float32", low=-50, high=50).round())
    run(lambda T, a: a.sort(dim=1, stable=True), big)  # parallel over rows
    run(lambda T, a: a.sort(dim=0, descending=True, stable=True), big)  # strided rows
    flat = make(np.random.default_rng(1).standard_normal(200_000).astype(np.float32))
    run(lambda T, a: a.sort(stable=True), flat)
    run(lambda T, a: a.sort()[0], flat)


@pytest.mark.parametrize("dtype", ["uint8", "int64", "float16", "float32", "float64"])
def test_topk_dtypes(dtype):
    kx, tx = make(sample((4, 30), dtype, low=-50, high=50), dtype)
    for k in [1, 5, 30]:
        for largest in [True, False]:
            res_k = kx.topk(k, largest=largest)
            res_t = tx.topk(k, largest=largest)
            check_selection(res_k, res_t, kx, -1)
    check_selection(kiln.topk(kx, 2, 0), torch.topk(tx, 2, 0), kx, 0)


def test_topk_distinct_values_match_indices_and_nan():
    # Without ties the indices are defined: they must equal PyTorch's.
    a = np.random.default_rng(2).permutation(600).reshape(3, 200).astype(np.float32)
    x = make(a, layout="transposed")
    for k, dim, largest in [(3, 1, True), (150, 1, False), (2, 0, True), (200, 1, True)]:
        run(lambda T, t, k=k, d=dim, lg=largest: t.topk(k, d, lg), x)
    run(lambda T, t: t.topk(3, sorted=False)[0].sort()[0], x)
    n = make(with_nans((3, 10)))
    run(lambda T, t: t.topk(4)[0], n)
    run(lambda T, t: t.topk(4, largest=False)[0], n)
    big = make(np.random.default_rng(3).permutation(1_000_000).astype(np.float32))
    run(lambda T, t: t.topk(10), big)
    run(lambda T, t: t.topk(1000, largest=False), big)
    run(lambda T, t: t.topk(0, 0), make(np.array(3.0, np.float32)))
    run(lambda T, t: t.topk(1), make(np.array(3.0, np.float32)))


def test_topk_and_kthvalue_ties_take_torchs_indices():
    # torch's CPU algorithms (partial_sort / nth_element + sort, and its quickselect for kthvalue)
    # are replayed, so among equal values the indices are torch's, not the lowest ones.
    ties = make(np.random.default_rng(4).integers(0, 4, (6, 40)).astype(np.float32))
    for k in [1, 2, 7, 40]:
        for largest in [True, False]:
            run(lambda T, t, k=k, lg=largest: t.topk(k, largest=lg), ties)
            run(lambda T, t, k=k, lg=largest: t.topk(k, largest=lg, sorted=False), ties)
        run(lambda T, t, k=k: t.kthvalue(k), ties)
    run(lambda T, t: t.topk(3, dim=0), ties)
    run(lambda T, t: t.kthvalue(4, dim=0, keepdim=True), ties)
    run(lambda T, t: t.kthvalue(3), make(with_nans((5, 12), seed=3)))


def test_kthvalue_median_mode():
    kx, tx = make(sample((5, 9), "int64", low=-3, high=3))
    for fn in [lambda T, a: a.kthvalue(3), lambda T, a: T.kthvalue(a, 1, 0, keepdim=True),
               lambda T, a: a.median(1), lambda T, a: a.median(0, keepdim=True),
               lambda T, a: a.mode(1), lambda T, a: T.mode(a, 0)]:
        k, t = fn(kiln, kx), fn(torch, tx)
        check(k[0], t[0])
        dim = 1 if k[0].shape[0] == 5 else 0
        idx = k[1] if k[1].dim() == 2 else k[1].unsqueeze(dim)
        check(kx.gather(dim, idx).reshape(k[0].shape), t[0])
    run(lambda T, a: a.median(), (kx, tx))
    run(lambda T, a: a.float().median(), (kx, tx))
    for dtype in ["float16", "float64"]:
        run(lambda T, a: a.median(1)[0], make(sample((3, 8), dtype)))
        run(lambda T, a: a.kthvalue(2, 0)[0], make(sample((3, 8), dtype)))
    nan = make(with_nans((4, 7), seed=2))
    run(lambda T, a: a.median(1)[0], nan)
    run(lambda T, a: a.median(), nan)
    run(lambda T, a: a.kthvalue(7)[0], nan)
    run(lambda T, a: a.mode(1), make(np.array([[1, 1, 1, 2, 2, 2, 3]], np.int64)))
    run(lambda T, a: a.kthvalue(1), make(np.array(4.0, np.float32)))
    run(lambda T, a: a.median(), make(np.zeros(0, np.float32)))


def test_sorting_errors():
    x = make(np.zeros((3, 4), np.float32))
    for fn in [
        lambda T, a: a.topk(5, 1),
        lambda T, a: a.topk(-1, 1),
        lambda T, a: a.topk(1, 2),
        lambda T, a: a.bool().topk(1),
        lambda T, a: a.kthvalue(5, 1),
        lambda T, a: a.kthvalue(0, 1),
        lambda T, a: a.sort(2),
        lambda T, a: a.median(2),
    ]:
        same_error(fn, x)


def test_sort_topk_meta_shapes():
    meta_shape(lambda T, a: a.sort(1), (3, 4))
    meta_shape(lambda T, a: a.topk(2, 0), (3, 4))
    meta_shape(lambda T, a: a.kthvalue(2, 1, keepdim=True), (3, 4))


# --- multinomial --------------------------------------------------------------------------------


def frequencies(samples, n):
    return np.bincount(samples.numpy().reshape(-1), minlength=n) / samples.numel()


def test_multinomial_with_replacement_distribution():
    kiln.manual_seed(0)
    p = np.array([0.1, 0.0, 0.5, 0.15, 0.25], np.float32)
    s = kiln.multinomial(kiln.from_numpy(p * 4), 40_000, replacement=True)
    assert s.dtype == kiln.int64 and tuple(s.shape) == (40_000,)
    f = frequencies(s, 5)
    assert f[1] == 0
    # 40k draws: a frequency's standard error is below 0.0025; allow 5 of them.
    np.testing.assert_allclose(f, p, atol=0.0125)


def test_multinomial_2d_rows_and_seed():
    w = kiln.tensor([[0.0, 0.0, 1.0], [1.0, 1.0, 0.0], [3.0, 1.0, 0.0]])
    kiln.manual_seed(3)
    a = w.multinomial(2000, True)
    kiln.manual_seed(3)
    b = kiln.multinomial(w, 2000, replacement=True)
    assert a.tolist() == b.tolist()  # the same seed draws the same samples
    assert tuple(a.shape) == (3, 2000)
    assert (a[0] == 2).all().item()
    assert set(a[1].unique().tolist()) == {0, 1}
    np.testing.assert_allclose(frequencies(a[2], 3), [0.75, 0.25, 0.0], atol=0.05)


def test_multinomial_without_replacement():
    kiln.manual_seed(1)
    w = kiln.tensor([[1.0, 0.0, 2.0, 3.0, 0.0], [5.0, 1.0, 1.0, 1.0, 1.0]])
    s = kiln.multinomial(w, 3)
    for row in s.tolist():
        assert len(set(row)) == 3
    assert sorted(s[0].tolist()) == [0, 2, 3]  # zero weights come last
    assert sorted(kiln.multinomial(w[0], 5).tolist()) == [0, 1, 2, 3, 4]
    # The first draw follows the weights: P(first = 0) = 5/9 in row 1.
    firsts = np.array([kiln.multinomial(w[1], 2)[0].item() for _ in range(3000)])
    assert abs((firsts == 0).mean() - 5 / 9) < 0.04


def test_multinomial_errors():
    for fn in [
        lambda T: T.multinomial(T.tensor([0.0, 0.0]), 1),
        lambda T: T.multinomial(T.tensor([-1.0, 2.0]), 1),
        lambda T: T.multinomial(T.tensor([1.0, float("nan")]), 1),
        lambda T: T.multinomial(T.tensor([1.0, float("inf")]), 1),
        lambda T: T.multinomial(T.tensor([1.0, 1.0]), 3),
        lambda T: T.multinomial(T.tensor([1, 1]), 1),
        lambda T: T.multinomial(T.ones(2, 2, 2), 1),
        lambda T: T.multinomial(T.ones(2), 0),
    ]:
        err = same_error(fn)
        assert str(err)


# --- unique / bincount / searchsorted / repeat_interleave -------------------------------------


@pytest.mark.parametrize("dtype", ["bool", "int32", "float32"])
def test_unique(dtype):
    x = make(sample((4, 5), dtype, low=-2, high=2), dtype)
    run(lambda T, a: T.unique(a), x)
    run(lambda T, a: a.unique(return_inverse=True), x)
    run(lambda T, a: T.unique(a, return_counts=True), x)
    run(lambda T, a: T.unique(a, sorted=True, return_inverse=True, return_counts=True), x)
    run(lambda T, a: T.unique(a[:0]), x)


def test_bincount():
    x = make(np.array([1, 4, 1, 0, 4, 4], np.int64))
    run(lambda T, a: T.bincount(a), x)
    run(lambda T, a: a.bincount(minlength=9), x)
    run(lambda T, a: a.int().bincount(T.tensor([0.5, 1, 2, 3, 4, 5])), x)
    run(lambda T, a: a.bincount(T.tensor([0.5, 1, 2, 3, 4, 5], dtype=T.float64)), x)
    run(lambda T, a: a.bincount(T.tensor([1, 2, 3, 4, 5, 6], dtype=T.int32)), x)
    run(lambda T, a: a.to(T.uint8).bincount(), x)
    run(lambda T, a: T.bincount(a[:0], minlength=3), x)
    for fn in [lambda T, a: T.bincount(-a), lambda T, a: T.bincount(a.float()),
               lambda T, a: T.bincount(a.reshape(2, 3)), lambda T, a: T.bincount(a, minlength=-1),
               lambda T, a: T.bincount(a, T.ones(5)), lambda T, a: T.bincount(a.bool())]:
        same_error(fn, x)


def test_searchsorted():
    bd = make(np.array([1.0, 2.0, 2.0, 5.0, np.nan], np.float32))
    v = make(np.array([[0.0, 2.0, 3.0], [5.0, 7.0, np.nan]], np.float32))
    run(lambda T, b, x: T.searchsorted(b, x), bd, v)
    run(lambda T, b, x: T.searchsorted(b, x, right=True), bd, v)
    run(lambda T, b, x: T.searchsorted(b, x, side="right", out_int32=True), bd, v)
    run(lambda T, b, x: T.searchsorted(b, 2), bd, v)
    run(lambda T, b, x: T.searchsorted(b, 2.5, right=True), bd, v)
    rows = make(np.array([[1, 3, 5], [2, 4, 6]], np.int64))
    run(lambda T, b, x: T.searchsorted(b, x.long()), rows, v)
    run(lambda T, b, x: T.searchsorted(b, x), rows, v)  # int boundaries, float values
    unsorted = make(np.array([5, 1, 3], np.int64))
    run(lambda T, b: T.searchsorted(b, T.tensor([0, 2, 4, 6]), sorter=b.argsort()), unsorted)
    for fn in [lambda T, b, x: T.searchsorted(b, x, side="left", right=True),
               lambda T, b, x: T.searchsorted(b, x, side="foo"),
               lambda T, b, x: T.searchsorted(b.reshape(1, 5), x),
               lambda T, b, x: T.searchsorted(b.reshape(1, 5), 1.0)]:
        same_error(fn, bd, v)


def test_repeat_interleave():
    x = make(sample((2, 3), "float32"))
    run(lambda T, a: T.repeat_interleave(T.tensor([1, 0, 3])), x)
    run(lambda T, a: a.repeat_interleave(2), x)
    run(lambda T, a: a.repeat_interleave(2, dim=1), x)
    run(lambda T, a: T.repeat_interleave(a, T.tensor([2, 1]), dim=0), x)
    run(lambda T, a: a.repeat_interleave(T.tensor([1, 0, 2]), dim=-1), x)
    run(lambda T, a: a.repeat_interleave(T.tensor(3), dim=0), x)
    run(lambda T, a: a.T.repeat_interleave(T.tensor([2]), dim=0, output_size=6), x)
    run(lambda T, a: a[0, 0].repeat_interleave(2), x)
    for fn in [lambda T, a: T.repeat_interleave(T.tensor([1, -1])),
               lambda T, a: a.repeat_interleave(T.tensor([1, 2, 3]), dim=0),
               lambda T, a: a.repeat_interleave(T.tensor([1, 2])),
               lambda T, a: a.repeat_interleave(-1),
               lambda T, a: T.repeat_interleave(T.tensor(2)),
               lambda T, a: a.repeat_interleave(T.tensor([1.0, 2.0]), dim=0)]:
        same_error(fn, x)
