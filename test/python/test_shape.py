"""Shape and view ops, cat/stack/split, tril/triu, repeat/flip/roll, masked_fill, index_select,
gather: differential tests against PyTorch (values, dtypes, shapes, strides, storage sharing,
errors)."""

import warnings

import kiln
import numpy as np
import pytest
from oracle import ALL_DTYPES, assert_match, both, need_torch, sample

torch = need_torch()


def make(a, dtype=None, layout="contiguous"):
    """(kiln, torch) tensors holding the array `a` (bfloat16 from float32 data). Layout
    "transposed" gives numpy's a.T-style view of a copy (non-contiguous, shared strides),
    "sliced" every other element of the last dim."""
    if layout == "contiguous":
        k, t = kiln.from_numpy(a.copy()), torch.from_numpy(a.copy())  # .copy() keeps 0-d arrays 0-d
        if dtype == "bfloat16":
            k, t = k.to(kiln.bfloat16), t.to(torch.bfloat16)
        return k, t
    assert dtype != "bfloat16"
    if layout == "transposed":
        base = np.ascontiguousarray(np.swapaxes(a, -1, -2))
        views = [np.swapaxes(base.copy(), -1, -2) for _ in range(2)]
    else:
        base = np.ascontiguousarray(np.repeat(a, 2, axis=-1))
        views = [base.copy()[..., ::2] for _ in range(2)]
    return kiln.from_numpy(views[0]), torch.from_numpy(views[1])


def check(k, t, check_stride=True):
    """assert_match, with bfloat16 results compared as float32 (after their dtype and geometry)."""
    if isinstance(t, (tuple, list)):
        assert isinstance(k, (tuple, list)) and len(k) == len(t)
        for a, b in zip(k, t):
            check(a, b, check_stride)
        return
    if hasattr(t, "dtype") and t.dtype == torch.bfloat16:
        assert k.dtype == kiln.bfloat16 and tuple(k.shape) == tuple(t.shape)
        if check_stride:
            assert tuple(k.stride()) == tuple(t.stride())
        k, t = k.to(kiln.float32), t.to(torch.float32)
    assert_match(k, t, check_stride=check_stride)


def run(fn, *tensors, check_stride=True):
    """fn(module, *tensors) in both libraries; the results must match (strides included)."""
    ks = [k for k, _ in tensors]
    ts = [t for _, t in tensors]
    k, t = fn(kiln, *ks), fn(torch, *ts)
    check(k, t, check_stride)
    return k, t


def same_error(fn, *tensors):
    """fn raises in PyTorch and kiln raises the same exception type."""
    with pytest.raises(Exception) as expected:
        fn(torch, *[t for _, t in tensors])
    with pytest.raises(Exception) as got:
        fn(kiln, *[k for k, _ in tensors])
    assert type(got.value) is type(expected.value), (
        f"{type(got.value)} ({got.value}) vs {type(expected.value)} ({expected.value})"
    )
    return got.value


def shares_storage(fn, a, dtype=None, layout="contiguous"):
    """The result of fn is a view: writing through it changes the base in both libraries alike."""
    kb, tb = make(a, dtype, layout)
    k, t = fn(kiln, kb), fn(torch, tb)
    for kv, tv in zip(k, t) if isinstance(t, (tuple, list)) else [(k, t)]:
        kv.fill_(-7)
        tv.fill_(-7)
    check(kb, tb)


def meta_matches(fn, *shapes, dtype="float32"):
    """fn on kiln meta tensors: the shape, strides and dtype of PyTorch's CPU result (PyTorch's
    own meta kernels take seconds to load). Extra tensors fn makes go on `t.device`."""
    ks = [kiln.empty(s, dtype=getattr(kiln, dtype), device="meta") for s in shapes]
    ts = [torch.zeros(s, dtype=getattr(torch, dtype)) for s in shapes]
    k, t = fn(kiln, *ks), fn(torch, *ts)
    for kv, tv in zip(k, t) if isinstance(t, (tuple, list)) else [(k, t)]:
        assert kv.is_meta
        assert tuple(kv.shape) == tuple(tv.shape)
        assert tuple(kv.stride()) == tuple(tv.stride())
        assert str(kv.dtype).split(".")[-1] == str(tv.dtype).split(".")[-1]


A234 = sample((2, 3, 4), "float32")
LAYOUTS = ["contiguous", "transposed", "sliced"]


# --- view / reshape ---------------------------------------------------------------------------

VIEW_CASES = [
    ((2, 3, 4), (24,)),
    ((2, 3, 4), (-1,)),
    ((2, 3, 4), (4, -1)),
    ((2, 3, 4), (2, 12)),
    ((2, 3, 4), (1, 2, 1, 12, 1)),
    ((0, 3), (3, 0)),
    ((0, 3), (-1, 3)),
    ((), (1,)),
    ((), ()),
    ((1,), ()),
    ((5,), (5, 1)),
]


@pytest.mark.parametrize("shape,new", VIEW_CASES)
def test_view_and_reshape(shape, new):
    x = make(sample(shape, "float32"))
    run(lambda T, a: a.view(new), x)
    run(lambda T, a: a.view(*new) if new else a.view(()), x)
    run(lambda T, a: a.reshape(new), x)
    run(lambda T, a: T.reshape(a, new), x)
    shares_storage(lambda T, a: a.view(new), sample(shape, "float32"))
    meta_matches(lambda T, a: a.view(new), shape)


@pytest.mark.parametrize("layout", ["transposed", "sliced"])
def test_reshape_of_noncontiguous_views_or_copies(layout):
    a = sample((3, 4, 6), "float64")
    x = make(a, layout=layout)
    for new in [(12, 6), (3, 24), (-1,), (3, 4, 3, 2), (6, 2, 6)]:
        run(lambda T, t, new=new: t.reshape(new), x)
    # Views exactly where PyTorch gives views: writes through the result reach the base alike.
    shares_storage(lambda T, t: t.reshape(3, 4, 3, 2), a, layout=layout)
    shares_storage(lambda T, t: t.reshape(-1), a, layout=layout)
    run(lambda T, t: t.reshape_as(T.zeros(72)), x)


def test_view_errors():
    x = make(A234)
    same_error(lambda T, a: a.transpose(0, 1).view(24), x)
    err = same_error(lambda T, a: a.transpose(1, 2).view(-1), x)
    assert "Use .reshape(...) instead" in str(err)
    for bad in [(5, -1), (-1, -1), (-2, 12), (4, 7), (0, -1)]:
        same_error(lambda T, a, bad=bad: a.view(bad), x)
        same_error(lambda T, a, bad=bad: a.reshape(bad), x)
    same_error(lambda T, a: a.view(-1, 0), make(np.zeros((0, 3), np.float32)))


def test_view_as():
    x, y = make(A234), make(np.zeros((6, 4), np.float32))
    run(lambda T, a, b: a.view_as(b), x, y)
    run(lambda T, a, b: a.reshape_as(b), x, y)
    shares_storage(lambda T, a: a.view_as(T.zeros(4, 6)), A234)


# --- permutations ----------------------------------------------------------------------------


@pytest.mark.parametrize("layout", LAYOUTS)
def test_permute_transpose(layout):
    x = make(A234, layout=layout)
    run(lambda T, a: a.permute(2, 0, 1), x)
    run(lambda T, a: a.permute((-1, 0, -2)), x)
    run(lambda T, a: T.permute(a, [1, 2, 0]), x)
    run(lambda T, a: a.transpose(0, 2), x)
    run(lambda T, a: T.transpose(a, -1, -3), x)
    run(lambda T, a: a.swapaxes(0, 1), x)
    run(lambda T, a: T.swapdims(a, 1, 2), x)
    run(lambda T, a: a.mT, x)
    run(lambda T, a: a.mH, x)
    run(lambda T, a: a.movedim(0, -1), x)
    run(lambda T, a: T.movedim(a, (0, 1), (2, 0)), x)
    run(lambda T, a: a.moveaxis(-1, 0), x)
    run(lambda T, a: a[0].t(), x)
    run(lambda T, a: T.t(a[0, 0]), x)
    run(lambda T, a: a[0].T, x)
    run(lambda T, a: a[0].H, x)
    shares_storage(lambda T, a: a.permute(1, 2, 0), A234, layout=layout)
    shares_storage(lambda T, a: a.transpose(0, 1), A234, layout=layout)
    meta_matches(lambda T, a: a.permute(2, 0, 1).transpose(0, 1).movedim(0, 2), (2, 3, 4))


def test_transpose_zero_dim_and_errors():
    s = make(np.array(3.0, np.float32))
    run(lambda T, a: a.t(), s)
    run(lambda T, a: a.transpose(0, -1), s)
    run(lambda T, a: a.permute(()), s)
    run(lambda T, a: a.movedim(0, 0), s)
    x = make(A234)
    same_error(lambda T, a: a.permute(0, 1), x)
    same_error(lambda T, a: a.permute(0, 1, 1), x)
    same_error(lambda T, a: a.permute(0, 1, 3), x)
    same_error(lambda T, a: a.transpose(0, 3), x)
    same_error(lambda T, a: a.t(), x)
    same_error(lambda T, a: a[0, 0].mT, x)
    same_error(lambda T, a: a.H, x)
    same_error(lambda T, a: a.movedim((0, 0), (1, 2)), x)
    same_error(lambda T, a: a.movedim((0, 1), (1,)), x)
    same_error(lambda T, a: a.movedim((0, 1), (2, 2)), x)


def test_T_warns_like_pytorch():
    x = make(A234)
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        run(lambda T, t: t[0].T, x)
    with pytest.warns(UserWarning):
        run(lambda T, t: t.T, x)
    with pytest.warns(UserWarning):
        run(lambda T, t: t[0, 0].T, x)
    with pytest.warns(UserWarning):
        run(lambda T, t: t[0, 0, 0].T, x)
    with pytest.warns(UserWarning, match="deprecated"):
        assert x[0].T.shape == (4, 3, 2)


# --- squeeze / unsqueeze / expand ------------------------------------------------------------


def test_squeeze_unsqueeze():
    a = sample((1, 3, 1, 2), "int64")
    x = make(a)
    for fn in [
        lambda T, t: t.squeeze(),
        lambda T, t: t.squeeze(0),
        lambda T, t: t.squeeze(1),
        lambda T, t: t.squeeze(-2),
        lambda T, t: t.squeeze((0, 2)),
        lambda T, t: T.squeeze(t, [0, 1]),
        lambda T, t: t.squeeze(dim=2),
        lambda T, t: t.unsqueeze(0),
        lambda T, t: t.unsqueeze(-1),
        lambda T, t: T.unsqueeze(t, 2),
        lambda T, t: t.unsqueeze(4),
    ]:
        run(fn, x)
        meta_matches(fn, (1, 3, 1, 2))
    s = make(np.array(5, np.int64))
    for fn in [
        lambda T, t: t.squeeze(),
        lambda T, t: t.squeeze(0),
        lambda T, t: t.squeeze(-1),
        lambda T, t: t.unsqueeze(0),
        lambda T, t: t.unsqueeze(-1),
    ]:
        run(fn, s)
    shares_storage(lambda T, t: t.squeeze(), a)
    shares_storage(lambda T, t: t.unsqueeze(1), a)
    same_error(lambda T, t: t.squeeze(4), x)
    same_error(lambda T, t: t.squeeze((0, 0)), x)
    same_error(lambda T, t: t.unsqueeze(5), x)
    same_error(lambda T, t: t.squeeze(1), s)


def test_unsqueeze_strides_of_noncontiguous():
    x = make(sample((3, 4), "float32"), layout="transposed")
    for d in range(-3, 3):
        run(lambda T, t, d=d: t.unsqueeze(d), x)
    x = make(sample((3, 4), "float32"), layout="sliced")
    for d in range(-3, 3):
        run(lambda T, t, d=d: t.unsqueeze(d), x)


@pytest.mark.parametrize("op", ["squeeze_", "unsqueeze_", "t_", "transpose_"])
def test_inplace_view_ops(op):
    args = {"squeeze_": (), "unsqueeze_": (1,), "t_": (), "transpose_": (0, 1)}[op]
    k, t = make(sample((1, 3), "float32"))
    rk, rt = getattr(k, op)(*args), getattr(t, op)(*args)
    assert rk is k and rt is t
    check(k, t, check_stride=True)


def test_expand():
    x = make(sample((3, 1), "float32"))
    run(lambda T, t: t.expand(3, 4), x)
    run(lambda T, t: t.expand(2, -1, 5), x)
    run(lambda T, t: t.expand((2, 3, 0)), x)
    run(lambda T, t: t.expand(1, 3, 1), x)
    run(lambda T, t: t.expand_as(T.zeros(2, 3, 6)), x)
    s = make(np.array(2.5, np.float32))
    run(lambda T, t: t.expand(2, 3), s)
    run(lambda T, t: t.expand(()), s)
    run(lambda T, t: t.expand(1), s)
    x2 = make(sample((3, 4), "float32"), layout="transposed")
    run(lambda T, t: t[:, :1].expand(3, 4), x2)
    run(lambda T, t: t.expand(2, 3, 4), x2)
    same_error(lambda T, t: t.expand(3), x)
    same_error(lambda T, t: t.expand(4, 4), x)
    same_error(lambda T, t: t.expand(-1, 3, 2), x)
    meta_matches(lambda T, t: t.expand(2, 3, 5), (3, 1))
    # Reading an expanded view shares the base's data.
    kb, tb = make(sample((3, 1), "float32"))
    ke, te = kb.expand(3, 4), tb.expand(3, 4)
    kb.fill_(2.0)
    tb.fill_(2.0)
    check(ke, te)


# --- flatten / unflatten / narrow / select / slice / as_strided -------------------------------


@pytest.mark.parametrize("layout", LAYOUTS)
def test_flatten_unflatten(layout):
    x = make(A234, layout=layout)
    for args in [(), (1,), (0, 1), (-2, -1), (1, 1), (0, -1)]:
        run(lambda T, t, args=args: t.flatten(*args), x)
        run(lambda T, t, args=args: T.flatten(t, *args), x)
    run(lambda T, t: t.flatten(start_dim=1, end_dim=2), x)
    run(lambda T, t: t.unflatten(2, (2, 2)), x)
    run(lambda T, t: t.unflatten(-1, (-1, 1, 2)), x)
    run(lambda T, t: T.unflatten(t, 0, (1, 2)), x)
    run(lambda T, t: t.flatten(), make(np.array(1.0, np.float32)))
    same_error(lambda T, t: t.flatten(2, 1), x)
    same_error(lambda T, t: t.unflatten(1, (2, 2)), x)
    same_error(lambda T, t: t.unflatten(1, ()), x)
    same_error(lambda T, t: t.unflatten(3, (1,)), x)
    shares_storage(lambda T, t: t.flatten(1), A234)
    meta_matches(lambda T, t: t.flatten(0, 1).unflatten(0, (3, 2)), (2, 3, 4))


def test_narrow_select_slice():
    x = make(A234, layout="transposed")
    run(lambda T, t: t.narrow(0, 1, 1), x)
    run(lambda T, t: T.narrow(t, -1, 1, 2), x)
    run(lambda T, t: t.narrow(2, -3, 2), x)
    run(lambda T, t: t.narrow(1, 3, 0), x)
    run(lambda T, t: t.select(1, -1), x)
    run(lambda T, t: T.select(t, 2, 3), x)
    shares_storage(lambda T, t: t.narrow(2, 1, 2), A234)
    shares_storage(lambda T, t: t.select(0, 1), A234)
    for fn in [
        lambda T, t: t.narrow(0, 3, 0),
        lambda T, t: t.narrow(0, -3, 1),
        lambda T, t: t.narrow(0, 1, 2),
        lambda T, t: t.narrow(0, 1, -1),
        lambda T, t: t.select(0, 2),
        lambda T, t: t.select(3, 0),
    ]:
        same_error(fn, x)
    s = make(np.array(1.0, np.float32))
    same_error(lambda T, t: t.narrow(0, 0, 1), s)
    same_error(lambda T, t: t.select(0, 0), s)
    meta_matches(lambda T, t: t.narrow(1, 1, 2).select(0, 1), (2, 3, 4))


def test_as_strided_detach_contiguous():
    a = sample((4, 5), "float32")
    x = make(a)
    run(lambda T, t: t.as_strided((2, 2), (1, 5)), x)
    run(lambda T, t: T.as_strided(t, (3,), (6,), 1), x)
    run(lambda T, t: t.as_strided((2, 3), (0, 1), storage_offset=2), x)
    shares_storage(lambda T, t: t.as_strided((2, 2), (5, 1), 3), a)
    for fn in [
        lambda T, t: t.as_strided((2, 2), (1, 5), 100),
        lambda T, t: t.as_strided((2, 2), (-1, 2)),
        lambda T, t: t.as_strided((2, 2), (1, 2), -1),
        lambda T, t: t.as_strided((2, 2), (1,)),
    ]:
        same_error(fn, x)
    kd, _ = run(lambda T, t: t.detach(), x)
    assert kd.requires_grad is False
    run(lambda T, t: T.detach(t), x)
    shares_storage(lambda T, t: t.detach(), a)
    xt = make(a, layout="transposed")
    k, _ = run(lambda T, t: t.contiguous(), xt)
    assert k.is_contiguous()
    assert x[0].is_contiguous() and not xt[0].is_contiguous()


# --- cat / stack -----------------------------------------------------------------------------


@pytest.mark.parametrize("dtype", ALL_DTYPES)
def test_cat_stack_every_dtype(dtype):
    x = make(sample((2, 3), dtype, seed=1), dtype)
    y = make(sample((2, 3), dtype, seed=2), dtype)
    z = make(sample((1, 3), dtype, seed=3), dtype)
    run(lambda T, a, b, c: T.cat([a, b, c]), x, y, z)
    run(lambda T, a, b: T.cat((a, b), 1), x, y)
    run(lambda T, a, b: T.cat([a, b], dim=-1), x, y)
    run(lambda T, a, b: T.concat([a, b]), x, y)
    run(lambda T, a, b: T.concatenate([a, b], -2), x, y)
    run(lambda T, a, b: T.stack([a, b]), x, y)
    run(lambda T, a, b: T.stack((a, b), dim=2), x, y)
    run(lambda T, a, b: T.stack([a, b], -1), x, y)


@pytest.mark.parametrize(
    "d1,d2",
    [
        ("int32", "int64"),
        ("uint8", "int8"),
        ("bool", "float16"),
        ("float16", "bfloat16"),
        ("int64", "float32"),
        ("float32", "float64"),
        ("bool", "uint8"),
    ],
)
def test_cat_promotes(d1, d2):
    x = make(sample((2, 2), d1, seed=4), d1)
    y = make(sample((3, 2), d2, seed=5), d2)
    run(lambda T, a, b: T.cat([a, b]), x, y)
    run(lambda T, a, b: T.cat([b, a, b]), x, y)
    run(lambda T, a, b: T.stack([a[:1], b[:1]]), x, y)


def test_cat_layouts_and_legacy_empty():
    x = make(sample((3, 4), "float32"), layout="transposed")
    y = make(sample((3, 4), "float32"), layout="sliced")
    run(lambda T, a, b: T.cat([a, b], 1), x, y)
    run(lambda T, a, b: T.stack([a, b], 1), x, y)
    e = make(np.zeros((0,), np.float64))
    e2 = make(np.zeros((0, 4), np.float32))
    run(lambda T, a, b: T.cat([a, b, a]), e, x)
    run(lambda T, a, b: T.cat([a, b], 1), e, x)
    run(lambda T, a: T.cat([a, a]), e)
    run(lambda T, a, b: T.cat([a, b]), e2, x)
    run(lambda T, a, b: T.cat([b, a, b], dim=0), e2, y)
    s = make(np.array(1.0, np.float32))
    run(lambda T, a, b: T.stack([a, b]), s, s)
    same_error(lambda T, a: T.cat([]), x)
    same_error(lambda T, a, b: T.cat([a, b]), x, s)
    same_error(lambda T, a, b: T.cat([a, b[0]]), x, y)
    same_error(lambda T, a, b: T.cat([a, b[:, :2]]), x, y)
    same_error(lambda T, a, b: T.cat([a, b], 2), x, y)
    same_error(lambda T, a: T.stack([]), x)
    same_error(lambda T, a, b: T.stack([a, b[:, :2]]), x, y)
    same_error(lambda T, a, b: T.stack([a, b], 3), x, y)
    meta_matches(lambda T, a, b: T.cat([a, b], 1), (2, 3), (2, 5))
    meta_matches(lambda T, a, b: T.stack([a, b], 1), (2, 3), (2, 3))


def test_cat_result_is_a_copy():
    kb, tb = make(A234)
    k, t = kiln.cat([kb, kb]), torch.cat([tb, tb])
    k.fill_(0)
    t.fill_(0)
    check(kb, tb)


# --- split / chunk / unbind --------------------------------------------------------------------

SPLITS = [
    lambda T, t: t.split(2),
    lambda T, t: t.split(1, 1),
    lambda T, t: T.split(t, 3, dim=2),
    lambda T, t: t.split([1, 1], 0),
    lambda T, t: t.split([2, 0, 2], -1),
    lambda T, t: T.split(t, [3], 1),
    lambda T, t: t.split_with_sizes([1, 2], 1),
    lambda T, t: T.split_with_sizes(t, [4, 0], dim=2),
    lambda T, t: t.chunk(2),
    lambda T, t: t.chunk(3, 2),
    lambda T, t: T.chunk(t, 5, -1),
    lambda T, t: t.chunk(2, 1),
    lambda T, t: t.unbind(),
    lambda T, t: T.unbind(t, 2),
    lambda T, t: t.unbind(dim=-2),
    lambda T, t: t.split(10),
]


@pytest.mark.parametrize("i", range(len(SPLITS)))
@pytest.mark.parametrize("layout", LAYOUTS)
def test_splits(i, layout):
    k, t = run(SPLITS[i], make(A234, layout=layout))
    assert isinstance(k, tuple) and isinstance(t, tuple)
    shares_storage(SPLITS[i], A234, layout=layout)
    meta_matches(SPLITS[i], (2, 3, 4))


def test_split_edge_cases():
    e = make(np.zeros((0,), np.float32))
    run(lambda T, t: t.split(0), e)
    run(lambda T, t: t.chunk(3), e)
    run(lambda T, t: t.unbind(), e)
    for n, c in [(5, 3), (6, 4), (1, 2), (7, 7)]:
        run(lambda T, t, c=c: t.chunk(c), make(np.arange(n, dtype=np.int64)))
    x = make(A234)
    s = make(np.array(1.0, np.float32))
    for fn in [
        lambda T, t: t.split(0),
        lambda T, t: t.split(-1),
        lambda T, t: t.split([1, 2]),
        lambda T, t: t.split([-1, 3]),
        lambda T, t: t.chunk(0),
        lambda T, t: t.unbind(5),
        lambda T, t: t.split(1, 3),
    ]:
        same_error(fn, x)
    for fn in [lambda T, t: t.chunk(1), lambda T, t: t.split(1), lambda T, t: t.unbind(0)]:
        same_error(fn, s)


# --- tril / triu -----------------------------------------------------------------------------


@pytest.mark.parametrize("dtype", ALL_DTYPES)
def test_tril_triu_every_dtype(dtype):
    x = make(sample((3, 4), dtype), dtype)
    for k in [0, 1, -1, 3, -5, 10]:
        run(lambda T, t, k=k: t.tril(k), x)
        run(lambda T, t, k=k: T.triu(t, diagonal=k), x)


@pytest.mark.parametrize("layout", LAYOUTS)
def test_tril_triu_batches_and_inplace(layout):
    a = sample((2, 4, 3), "float64")
    x = make(a, layout=layout)
    run(lambda T, t: T.tril(t), x)
    run(lambda T, t: t.triu(1), x)
    run(lambda T, t: t.tril(-1), make(np.zeros((0, 3, 3), np.float32)))
    run(lambda T, t: t.triu(2**62), x)
    run(lambda T, t: t.tril(-(2**62)), x)
    kb, tb = make(a, layout=layout)
    assert kb.tril_(1) is kb and tb.tril_(1) is tb
    check(kb, tb)
    kb.triu_(-1)
    tb.triu_(-1)
    check(kb, tb)
    same_error(lambda T, t: t[0, 0].tril(), x)
    meta_matches(lambda T, t: t.triu(1), (2, 3, 3))


# --- masked_fill -------------------------------------------------------------------------------


@pytest.mark.parametrize("dtype", ALL_DTYPES)
def test_masked_fill_every_dtype(dtype):
    x = make(sample((3, 4), dtype), dtype)
    m = make(sample((3, 4), "bool", seed=7))
    row = make(sample((4,), "bool", seed=8))
    value = True if dtype == "bool" else (2 if dtype in ("uint8", "int8", "int16", "int32", "int64") else 2.5)
    run(lambda T, t, mm: t.masked_fill(mm, value), x, m)
    run(lambda T, t, mm: T.masked_fill(t, mm, value), x, row)
    run(lambda T, t, mm: t.masked_fill(mm, 1), x, m)
    run(lambda T, t, mm: t.masked_fill(mm, T.from_numpy(np.array(3))), x, m)
    kb, tb = make(sample((3, 4), dtype), dtype)
    assert kb.masked_fill_(m[0], value) is kb
    tb.masked_fill_(m[1], value)
    check(kb, tb)


def test_masked_fill_broadcast_cast_and_errors():
    x = make(sample((3, 4), "int64"))
    m = make(sample((2, 1, 4), "bool", seed=9))
    run(lambda T, t, mm: t.masked_fill(mm, 1.5), x, m)
    run(lambda T, t, mm: t[0].masked_fill(mm, -3), x, m)
    run(lambda T, t, mm: t.masked_fill(mm[0, 0], T.from_numpy(np.array(2.75))), x, m)
    run(lambda T, t, mm: t.to(T.float32).masked_fill(mm[0], float("inf")), x, m)
    run(lambda T, t, mm: t.T.masked_fill(mm[0, 0, :3], 9), x, m)
    run(lambda T, t, mm: t.masked_fill(mm[0, 0, 0], 9), x, m)
    s = make(np.array(3.0, np.float32))
    run(lambda T, t, mm: t.masked_fill(mm[0, 0, 0], 0.5), s, m)
    same_error(lambda T, t, mm: t.masked_fill(mm.to(T.int32), 1), x, m)
    same_error(lambda T, t, mm: t.masked_fill(mm, T.from_numpy(np.array([1]))), x, m)
    same_error(lambda T, t, mm: t[0].masked_fill_(mm, 1), x, m)
    same_error(lambda T, t, mm: t.masked_fill(mm[:, :, :3], 1), x, m)
    meta_matches(lambda T, t: t.masked_fill(T.zeros((2, 1, 4), dtype=T.bool, device=t.device), 1.0), (3, 4))


# --- repeat / flip / roll ----------------------------------------------------------------------


@pytest.mark.parametrize("dtype", ["bool", "uint8", "int32", "int64", "float16", "bfloat16", "float64"])
def test_repeat_flip_roll_dtypes(dtype):
    x = make(sample((2, 3), dtype), dtype)
    run(lambda T, t: t.repeat(2, 3), x)
    run(lambda T, t: t.flip(0, 1), x)
    run(lambda T, t: T.roll(t, 1, 1), x)


@pytest.mark.parametrize("layout", LAYOUTS)
def test_repeat(layout):
    x = make(A234, layout=layout)
    for reps in [(1, 1, 1), (2, 1, 3), (2, 2, 1, 1), (0, 1, 1), (3, 1, 2, 1, 1)]:
        run(lambda T, t, reps=reps: t.repeat(*reps), x)
    run(lambda T, t: t.repeat((2, 1, 1)), x)
    s = make(np.array(4, np.int64))
    run(lambda T, t: t.repeat(()), s)
    run(lambda T, t: t.repeat(2, 3), s)
    same_error(lambda T, t: t.repeat(2, 2), x)
    same_error(lambda T, t: t.repeat(2, -1, 1), x)
    meta_matches(lambda T, t: t.repeat(2, 1, 1, 3), (2, 3, 4))


@pytest.mark.parametrize("layout", LAYOUTS)
def test_flip(layout):
    x = make(A234, layout=layout)
    for dims in [(0,), (1, 2), (-1,), (0, 1, 2), ()]:
        run(lambda T, t, dims=dims: t.flip(dims), x)
        run(lambda T, t, dims=dims: T.flip(t, dims), x)
    run(lambda T, t: t.flip(2), x)
    run(lambda T, t: t[::2, :, 1:].flip(0, 2), x)
    run(lambda T, t: t.flip(0), make(np.array(1, np.int32)))
    run(lambda T, t: t.flip(0), make(np.zeros((0, 3), np.int32)))
    same_error(lambda T, t: t.flip(0, 0), x)
    same_error(lambda T, t: t.flip(3), x)
    meta_matches(lambda T, t: t.flip(0), (2, 3))


@pytest.mark.parametrize("layout", LAYOUTS)
def test_roll(layout):
    x = make(A234, layout=layout)
    for shifts, dims in [
        (1, 0),
        (-1, 2),
        (5, 1),
        ((1, 2), (0, 2)),
        ((1, 1), (1, 1)),
        (7, None),
        (-30, None),
        ([2], [-1]),
        (0, 1),
    ]:
        if dims is None:
            run(lambda T, t, s=shifts: t.roll(s), x)
        else:
            run(lambda T, t, s=shifts, d=dims: T.roll(t, s, d), x)
            run(lambda T, t, s=shifts, d=dims: t.roll(shifts=s, dims=d), x)
    run(lambda T, t: t.roll(1), make(np.array(1.0, np.float32)))
    run(lambda T, t: t.roll(1, 0), make(np.zeros((0, 3), np.float32)))
    same_error(lambda T, t: t.roll((1, 2), (0,)), x)
    same_error(lambda T, t: t.roll((), ()), x)
    same_error(lambda T, t: t.roll(1, 3), x)
    same_error(lambda T, t: t.roll(1, 0), make(np.array(1.0, np.float32)))
    meta_matches(lambda T, t: t.roll(1, 0), (2, 3))


# --- index_select / gather -----------------------------------------------------------------------


@pytest.mark.parametrize("dtype", ALL_DTYPES)
def test_index_select_gather_dtypes(dtype):
    x = make(sample((3, 4), dtype), dtype)
    run(lambda T, t: t.index_select(0, T.from_numpy(np.array([2, 0, 2]))), x)
    run(lambda T, t: T.index_select(t, 1, T.from_numpy(np.array([3, 1], np.int32))), x)
    run(lambda T, t: t.gather(1, T.from_numpy(np.array([[0, 3], [1, 1], [2, 0]]))), x)
    run(lambda T, t: T.gather(t, 0, T.from_numpy(np.array([[2, 1, 0, 0]]))), x)


@pytest.mark.parametrize("layout", LAYOUTS)
def test_index_select_gather_shapes(layout):
    x = make(A234, layout=layout)
    idx = lambda T, v, dt=np.int64: T.from_numpy(np.array(v, dt))
    run(lambda T, t: t.index_select(2, idx(T, [3, 0, 0, 1, 2])), x)
    run(lambda T, t: t.index_select(-2, idx(T, 1)), x)
    run(lambda T, t: t.index_select(0, idx(T, [])), x)
    run(lambda T, t: t.gather(2, idx(T, np.zeros((2, 3, 6), np.int64) + 3)), x)
    run(lambda T, t: t.gather(0, idx(T, [[[1, 0]], [[0, 1]]])), x)
    run(lambda T, t: t.gather(1, idx(T, [[[2, 0]], [[0, 1]]], np.int32)), x)
    run(lambda T, t: t.gather(-1, idx(T, np.zeros((2, 0, 1), np.int64))), x)
    s = make(np.array(5.0, np.float32))
    run(lambda T, t: t.index_select(0, idx(T, [0])), s)
    run(lambda T, t: t.index_select(0, idx(T, 0)), s)
    run(lambda T, t: t.gather(0, idx(T, 0)), s)
    run(lambda T, t: t.gather(0, idx(T, [0, 0])), s)
    for fn in [
        lambda T, t: t.index_select(0, idx(T, [-1])),
        lambda T, t: t.index_select(0, idx(T, [2])),
        lambda T, t: t.index_select(0, idx(T, [[0]])),
        lambda T, t: t.index_select(0, idx(T, [0.0], np.float32)),
        lambda T, t: t.index_select(3, idx(T, [0])),
        lambda T, t: t.gather(0, idx(T, [[[2]]])),
        lambda T, t: t.gather(0, idx(T, [[[-1]]])),
        lambda T, t: t.gather(0, idx(T, [[[0]]], np.int16)),
        lambda T, t: t.gather(0, idx(T, [0])),
        lambda T, t: t.gather(1, idx(T, np.zeros((3, 1, 1), np.int64))),
    ]:
        same_error(fn, x)
    same_error(lambda T, t: t.index_select(0, idx(T, [0, 0])), s)
    meta_matches(lambda T, t: t.index_select(1, T.zeros(5, dtype=T.int64, device=t.device)), (2, 3, 4))
    meta_matches(lambda T, t: t.gather(1, T.zeros(2, 5, 4, dtype=T.int64, device=t.device)), (2, 3, 4))


def test_varargs_int_lists_follow_pytorch():
    # x.roll(1, 0) is shifts=1, dims=0; only a sole int-list parameter takes varargs.
    x = make(A234)
    run(lambda T, t: t.roll(1, 0), x)
    run(lambda T, t: t.view(4, 6), x)
    run(lambda T, t: t.permute(1, 0, 2), x)
    run(lambda T, t: t.repeat(1, 2, 1), x)
    run(lambda T, t: t.flip(0, 1), x)
    same_error(lambda T, t: T.flip(t, 0, 1), x)


def test_regressions_found_by_fuzzing():
    # Layout of flip's output for a non-dense input with size-1 dims (PyTorch's infer_dense_strides).
    base = make(np.arange(40, dtype=np.float32))
    run(lambda T, t: t.as_strided((1, 3, 4), (12, 1, 6), 1).flip(-1), base)
    run(lambda T, t: t.as_strided((2, 1, 3), (1, 5, 4), 0).flip(0), base)
    # roll of an empty tensor clones it before looking at the dim.
    run(lambda T, t: t.roll(1, 5), make(np.zeros((0, 3), np.float32)))
    # unflatten of a 0-d tensor is a RuntimeError in PyTorch.
    same_error(lambda T, t: t.unflatten(0, (1,)), make(np.array(1.0, np.float32)))


@pytest.mark.parametrize(
    "dtype,value",
    [
        ("uint8", 300),
        ("uint8", -1),
        ("uint8", -256),
        ("uint8", -1.0),
        ("int8", 128),
        ("int8", 127.9),
        ("int8", float("nan")),
        ("int32", float("inf")),
        ("float16", 70000),
        ("float16", float("inf")),
        ("float32", 1e300),
        ("bfloat16", 1e39),
        ("bool", 5),
        ("int64", 1e19),
        ("float64", -1e308),
    ],
)
def test_masked_fill_value_range_like_pytorch(dtype, value):
    x = make(np.zeros(3, np.float32 if dtype == "bfloat16" else dtype), dtype)
    m = make(np.array([True, False, True]))
    try:
        expected = x[1].masked_fill(m[1], value)
    except RuntimeError:
        same_error(lambda T, t, mm: t.masked_fill(mm, value), x, m)
        return
    check(x[0].masked_fill(m[0], value), expected)


def test_index_select_and_gather_edge_errors():
    idx = lambda T, v: T.from_numpy(np.array(v, np.int64))
    for shape, dim in [((2, 3), 1), ((2, 3, 4), 1), ((2, 0), 0), ((0, 3), 0), ((2, 3, 4), 2), ((3,), 0)]:
        x = make(np.zeros(shape, np.float32))
        same_error(lambda T, t, d=dim: t.index_select(d, idx(T, [7])), x)
        same_error(lambda T, t, d=dim: t.index_select(d, idx(T, [-1])), x)
    # An empty gather index is not checked against self.
    run(lambda T, t: t.gather(1, idx(T, np.zeros((3, 0, 5), np.int64))), make(A234))
    run(lambda T, t: t.gather(0, T.from_numpy(np.zeros((0, 9), np.float32))), make(A234[0]))


# Composites of kiln/_composites_extra.py against torch: values, dtypes, gradients, errors.
def _extra_cases(lib, a, b, p, nanx):
    iu = lib.tril_indices(4, 4, offset=-1)
    return [
        lib.tile(a, (2, 1)), a.tile((2, 1, 3)), lib.hstack([a, a[:, :1]]), lib.hstack([a[0], b[0]]),
        lib.vstack([a, b[:2]]), lib.vstack([a[0], a[1]]), lib.dstack([a, a]), lib.column_stack([a[:, 0], a[:, :2]]),
        lib.tensor_split(b, 3), lib.tensor_split(b, [1, 4], dim=1), a.tensor_split(lib.tensor([1, -1]), 1),
        lib.hsplit(b, 2), lib.vsplit(b, [2]), lib.rot90(a), lib.rot90(a, 2), lib.rot90(a, -1, [1, 0]),
        lib.take_along_dim(b, b.argsort(dim=1), dim=1), lib.take_along_dim(b, b.argmax(1, keepdim=True), 1),
        lib.take_along_dim(b, lib.tensor([3, 0])), lib.trace(a[:, :3]), lib.trace(lib.arange(9).view(3, 3)),
        lib.kron(a[:2, :2], lib.eye(2)), lib.kron(a[0], b[:2]), iu, lib.triu_indices(3, 5, 1),
        b[:, iu[0]] * b[:, iu[1]], lib.cartesian_prod(lib.arange(2), lib.arange(3)), lib.cdist(a, b),
        lib.cdist(a, b, p=1), lib.cdist(a[None], b[None], p=float("inf")), lib.cdist(a, a, p=3),
        lib.diag_embed(a[:, :2]), lib.diag_embed(a, offset=-1), lib.diag_embed(a, 1, 0, 2), lib.logit(p),
        lib.logit(p, eps=0.2), lib.frac(a * 3), lib.sgn(a), lib.copysign(a, b[:3]), lib.copysign(a, -0.0),
        lib.copysign(lib.arange(3), lib.tensor([-0.0, 0.0, -1.0])), lib.float_power(a.abs(), 2),
        lib.float_power(lib.arange(3), 0.5), lib.nansum(nanx, dim=1), lib.nansum(nanx), lib.nanmean(nanx),
        nanx.nanmean(0, keepdim=True), a.t().ravel(), lib.atleast_2d(p), lib.atleast_3d(a),
        lib.atleast_1d(lib.tensor(3.0), p),
    ]


def test_extra_composites_match_torch():
    torch = need_torch()
    arrays = [sample((3, 4), "float32", seed=31), sample((5, 4), "float32", seed=32),
              sample((6,), "float32", seed=33, low=0.05, high=0.95)]
    nanx = sample((3, 4), "float32", seed=34)
    nanx[nanx > 1] = np.nan
    (ka, ta), (kb, tb), (kp, tp), (kn, tn) = [both(x) for x in arrays + [nanx]]
    for k, t in ((ka, ta), (kp, tp)):
        k.requires_grad_(True)
        t.requires_grad_(True)
    outs_k, outs_t = _extra_cases(kiln, ka, kb, kp, kn), _extra_cases(torch, ta, tb, tp, tn)
    assert_match(outs_k, outs_t, rtol=1e-5, atol=1e-5)

    def loss(outs, lib):
        used = [o for o in outs if not isinstance(o, tuple) and o.dtype.is_floating_point and o.requires_grad]
        return sum((o * lib.linspace(0.5, 1.5, o.numel()).view(o.shape).to(o.dtype)).sum() for o in used)

    gk = kiln.autograd.grad(loss(outs_k, kiln), (ka, kp))
    gt = torch.autograd.grad(loss(outs_t, torch), (ta, tp))
    assert_match(gk, gt, rtol=1e-4, atol=1e-5)


def test_cdist_gradient_is_zero_at_zero_distance():
    torch = need_torch()
    a = sample((3, 2), "float32", seed=35)
    ka, ta = both(a)
    ka.requires_grad_(True)
    ta.requires_grad_(True)
    gk, = kiln.autograd.grad(kiln.cdist(ka, ka).sum(), ka)
    gt, = torch.autograd.grad(torch.cdist(ta, ta).sum(), ta)
    assert not np.isnan(gk.numpy()).any()
    assert_match(gk, gt, rtol=1e-5, atol=1e-6)


def test_extra_composites_compile_like_eager():
    a = kiln.from_numpy(sample((3, 4), "float32", seed=36))
    b = kiln.from_numpy(sample((5, 4), "float32", seed=37))

    def fn(a, b):
        return (kiln.cdist(a, b), kiln.tile(a, (2, 1)), kiln.hstack([a, a]), kiln.rot90(a),
                kiln.take_along_dim(b, b.argsort(1), 1), kiln.kron(a, kiln.eye(2)), kiln.diag_embed(a),
                kiln.tensor_split(b, 2)[1], kiln.logit(a.sigmoid()), kiln.copysign(a, b[:3]))

    for got, want in zip(kiln.compile(fn)(a, b), fn(a, b)):
        np.testing.assert_allclose(got.numpy(), want.numpy(), rtol=1e-5, atol=1e-6)


def test_extra_composite_errors_match_torch():
    torch = need_torch()
    for lib in (kiln, torch):
        with pytest.raises(RuntimeError, match="expected total rotation dims == 2"):
            lib.rot90(lib.ones(2, 2), 1, [0])
        with pytest.raises(RuntimeError, match="expected rotation dims to be different"):
            lib.rot90(lib.ones(2, 2), 1, [1, 1])
        with pytest.raises(RuntimeError, match="should have the same number of dimensions"):
            lib.take_along_dim(lib.ones(2, 2), lib.zeros(2, dtype=lib.long), 0)
        with pytest.raises(RuntimeError, match="not divisible by the split_size 3"):
            lib.hsplit(lib.ones(2, 4), 3)
        with pytest.raises(RuntimeError, match="X1 and X2 must have the same number of columns"):
            lib.cdist(lib.ones(2, 3), lib.ones(2, 4))
        with pytest.raises(RuntimeError, match="nanmean\\(\\): expected input to have floating point"):
            lib.nanmean(lib.ones(2, dtype=lib.long))
