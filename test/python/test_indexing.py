"""Tensor.__getitem__ / __setitem__ (basic indexing as views, advanced indexing as copies and
index_put_), len/iter and index_put: differential tests against PyTorch."""

import operator
import warnings

import kiln
import numpy as np
import pytest
from oracle import ALL_DTYPES, assert_match, need_torch, sample

torch = need_torch()

# PyTorch warns about deprecated forms it still accepts (uint8 masks, lists read as tuples).
pytestmark = pytest.mark.filterwarnings("ignore::UserWarning")


def make(a, dtype=None, layout="contiguous"):
    """(kiln, torch) tensors holding `a`; "transposed" is a numpy a.T-style view (shared strides)."""
    if layout == "contiguous":
        k, t = kiln.from_numpy(a.copy()), torch.from_numpy(a.copy())
        if dtype == "bfloat16":
            k, t = k.to(kiln.bfloat16), t.to(torch.bfloat16)
        return k, t
    base = np.ascontiguousarray(np.swapaxes(a, -1, -2))
    return kiln.from_numpy(np.swapaxes(base.copy(), -1, -2)), torch.from_numpy(
        np.swapaxes(base.copy(), -1, -2)
    )


def check(k, t, check_stride=False):
    if t.dtype == torch.bfloat16:
        assert k.dtype == kiln.bfloat16 and tuple(k.shape) == tuple(t.shape)
        k, t = k.to(kiln.float32), t.to(torch.float32)
    assert_match(k, t, check_stride=check_stride)


def arr(T, values, dtype=np.int64):
    return T.from_numpy(np.array(values, dtype))


A = sample((2, 3, 4), "float32")

# Basic indexes: results are views with PyTorch's strides.
BASIC = [
    lambda T: 0,
    lambda T: -1,
    lambda T: 1,
    lambda T: (0, 1),
    lambda T: (-1, -2),
    lambda T: (1, slice(None), 2),
    lambda T: slice(None),
    lambda T: slice(1, None),
    lambda T: slice(None, None, 2),
    lambda T: slice(-3, -1),
    lambda T: slice(1, 100),
    lambda T: slice(-100, 2),
    lambda T: slice(5, 1),
    lambda T: (slice(None), slice(None, None, 3)),
    lambda T: (slice(None), 0),
    lambda T: (Ellipsis, 1),
    lambda T: (0, Ellipsis),
    lambda T: (Ellipsis,),
    lambda T: Ellipsis,
    lambda T: None,
    lambda T: (None, 0),
    lambda T: (0, None, slice(None), None),
    lambda T: (Ellipsis, None),
    lambda T: (slice(1, None, 2), None, Ellipsis, 0),
    lambda T: np.int64(1),
    lambda T: (np.int32(0), np.int64(2)),
    lambda T: (),
    lambda T: arr(T, 1),
    lambda T: (slice(None), arr(T, -1, np.int32)),
    lambda T: slice(arr(T, 1), None),
    lambda T: (Ellipsis, slice(None, arr(T, 3), 2)),
    lambda T: (Ellipsis, Ellipsis),
    lambda T: (slice(None), slice(None), slice(None)),
    lambda T: (0, 0, 0),
    lambda T: (slice(2, 5), 1),
]


@pytest.mark.parametrize("i", range(len(BASIC)))
@pytest.mark.parametrize("layout", ["contiguous", "transposed"])
def test_basic_getitem_is_a_view(i, layout):
    kb, tb = make(A, layout=layout)
    k, t = kb[BASIC[i](kiln)], tb[BASIC[i](torch)]
    check(k, t, check_stride=True)
    assert k.is_contiguous() == t.is_contiguous()
    assert k.storage_offset() == t.storage_offset()
    assert not k._is_same(kb)  # a new tensor even for x[...] and x[()]
    if k.numel():
        k.fill_(-5)
        t.fill_(-5)
        check(kb, tb)


ADVANCED = [
    lambda T: [0, 1],
    lambda T: [1, -2],
    lambda T: [[0, 1], [1, 0]],
    lambda T: arr(T, [1, 0, 1]),
    lambda T: arr(T, [1, 0], np.int32),
    lambda T: arr(T, [[0, 1], [1, 1]]),
    lambda T: (arr(T, [0, 1]), arr(T, [2, 0])),
    lambda T: (slice(None), arr(T, [2, 0, 1])),
    lambda T: (arr(T, [0, 1]), slice(None), arr(T, [1, 2])),
    lambda T: (None, arr(T, [0, 1]), None, arr(T, [1, 2])),
    lambda T: (Ellipsis, arr(T, [0, 3])),
    lambda T: (arr(T, [0, 1]), 1, arr(T, [1, 2])),
    lambda T: (arr(T, [[0], [1]]), arr(T, [0, 1, 2])),
    lambda T: (slice(None), arr(T, [[0], [2]]), arr(T, [1, 3])),
    lambda T: (
        arr(T, [1]),
        slice(1, None),
        slice(None),
    ),
    lambda T: arr(T, sample((2, 3, 4), "bool", seed=3), np.bool_),
    lambda T: arr(T, [[True, False, True], [False, False, True]], np.bool_),
    lambda T: (slice(None), arr(T, [True, False, True], np.bool_)),
    lambda T: (0, arr(T, sample((3, 4), "bool", seed=4), np.bool_)),
    lambda T: (arr(T, sample((2, 3), "bool", seed=5), np.bool_), 0),
    lambda T: (arr(T, [True, False], np.bool_), slice(None), arr(T, [1, 2])),
    lambda T: True,
    lambda T: False,
    lambda T: (True, 0),
    lambda T: (0, True),
    lambda T: (0, False),
    lambda T: (Ellipsis, True),
    lambda T: arr(T, True, np.bool_),
    lambda T: arr(T, False, np.bool_),
    lambda T: (slice(None), arr(T, True, np.bool_)),
    lambda T: np.array([1, 0]),
    lambda T: np.array([True, False]),
    lambda T: [True, False],
    lambda T: [0.5, 1.2],
    lambda T: [],
    lambda T: (slice(None), []),
    lambda T: arr(T, [1, 0], np.uint8),
    lambda T: arr(T, np.zeros((0,), np.int64)),
    lambda T: (arr(T, [0, 1]), [1, 2], slice(None)),
    lambda T: [[0, 1], [2]],
    lambda T: [0, slice(1, None)],
    lambda T: (Ellipsis, [0, 0, 3], None),
]


@pytest.mark.parametrize("i", range(len(ADVANCED)))
def test_advanced_getitem_copies(i):
    kb, tb = make(A)
    k, t = kb[ADVANCED[i](kiln)], tb[ADVANCED[i](torch)]
    check(k, t)
    if k.numel():
        k.fill_(-5)
        t.fill_(-5)
        check(kb, tb)  # the base is untouched in both


@pytest.mark.parametrize("i", [0, 3, 6, 8, 12, 15, 17, 21, 27])
def test_advanced_getitem_noncontiguous_input(i):
    kb, tb = make(A, layout="transposed")
    check(kb[ADVANCED[i](kiln)], tb[ADVANCED[i](torch)])


@pytest.mark.parametrize("dtype", ALL_DTYPES)
def test_getitem_every_dtype(dtype):
    kb, tb = make(sample((3, 4), dtype), dtype)
    for idx in [
        lambda T: 1,
        lambda T: (slice(None), 2),
        lambda T: (slice(None, None, 2), None),
        lambda T: [2, 0],
        lambda T: (arr(T, [0, 2]), arr(T, [3, 1])),
        lambda T: arr(T, sample((3, 4), "bool", seed=1), np.bool_),
    ]:
        check(kb[idx(kiln)], tb[idx(torch)])


def same_error(fn):
    with pytest.raises(Exception) as expected:
        fn(torch)
    with pytest.raises(Exception) as got:
        fn(kiln)
    assert type(got.value) is type(expected.value), (
        f"{type(got.value)} ({got.value}) vs {type(expected.value)} ({expected.value})"
    )
    return got.value


GETITEM_ERRORS = [
    lambda T, x: x[5],
    lambda T, x: x[-3],
    lambda T, x: x[0, 5],
    lambda T, x: x[0, 0, 0, 0],
    lambda T, x: x[1.5],
    lambda T, x: x[0, 1.5],
    lambda T, x: x["a"],
    lambda T, x: x[:, "a"],
    lambda T, x: x[::-1],
    lambda T, x: x[::0],
    lambda T, x: x[0, ::-2],
    lambda T, x: x[arr(T, [0.0], np.float32)],
    lambda T, x: x[arr(T, [5])],
    lambda T, x: x[:, arr(T, [-4])],
    lambda T, x: x[arr(T, [True, False, True], np.bool_)],
    lambda T, x: x[arr(T, [0, 1]), arr(T, [0, 1, 2])],
    lambda T, x: x[{}],
    lambda T, x: x[object()],
    lambda T, x: x[10**30],
    lambda T, x: x[[0, 10**30]],
    lambda T, x: x[arr(T, [1], np.int16)],
    lambda T, x: x[..., 0, 0, 0, 0],
    lambda T, x: x[arr(T, np.ones((2, 3, 4, 1), np.bool_), np.bool_)],
]


@pytest.mark.parametrize("i", range(len(GETITEM_ERRORS)))
def test_getitem_errors(i):
    xs = {kiln: make(A)[0], torch: make(A)[1]}
    err = same_error(lambda T: GETITEM_ERRORS[i](T, xs[T]))
    if i == 0:
        assert "index 5 is out of bounds for dimension 0 with size 2" in str(err)


def test_getitem_zero_dim():
    k, t = make(np.array(7.0, np.float32))
    for idx in [None, Ellipsis, (), True, False, (None, None), (Ellipsis, None)]:
        check(k[idx], t[idx], check_stride=True)
    xs = {kiln: k, torch: t}
    err = same_error(lambda T: xs[T][0])
    assert "invalid index of a 0-dim tensor" in str(err)
    same_error(lambda T: xs[T][1])
    same_error(lambda T: xs[T][:])
    same_error(lambda T: xs[T][0, 0])


def test_zero_size_dims():
    k, t = make(np.zeros((0, 3), np.float32))
    for idx in [slice(None), (slice(None), 1), (slice(None), [0, 2]), (Ellipsis, None), []]:
        check(k[idx], t[idx])
    xs = {kiln: k, torch: t}
    same_error(lambda T: xs[T][0])
    same_error(lambda T: xs[T][arr(T, [0])])


# --- __setitem__ ---------------------------------------------------------------------------------

VALUES = [
    lambda T: 3,
    lambda T: -1.5,
    lambda T: True,
    lambda T: arr(T, 2.5, np.float32),
    lambda T: arr(T, [1.0, 2.0, 3.0, 4.0], np.float32),
    lambda T: arr(T, [[7]], np.int64),
    lambda T: arr(T, 9, np.int64),
]


def assign_like_pytorch(kb, tb, idx, val):
    """kb[idx] = val as tb[idx] = val: the same result, or the same exception type."""
    try:
        tb[idx(torch)] = val(torch)
    except Exception as expected:  # noqa: BLE001 (any PyTorch error: kiln must raise the same type)
        with pytest.raises(type(expected)):
            kb[idx(kiln)] = val(kiln)
        return
    kb[idx(kiln)] = val(kiln)
    check(kb, tb)


@pytest.mark.parametrize("i", range(len(BASIC)))
@pytest.mark.parametrize("v", range(len(VALUES)))
def test_basic_setitem(i, v):
    kb, tb = make(A, layout="transposed")
    assign_like_pytorch(kb, tb, BASIC[i], VALUES[v])


SET_ADVANCED = [
    0,
    1,
    3,
    4,
    6,
    7,
    8,
    9,
    10,
    11,
    15,
    16,
    17,
    18,
    21,
    22,
    23,
    24,
    27,
    28,
    30,
    31,
    32,
    34,
    35,
    37,
    38,
    39,
    40,
    41,
]


@pytest.mark.parametrize("i", SET_ADVANCED)
@pytest.mark.parametrize("v", range(len(VALUES)))
def test_advanced_setitem(i, v):
    kb, tb = make(A)
    assign_like_pytorch(kb, tb, ADVANCED[i], VALUES[v])


@pytest.mark.parametrize("dtype", ALL_DTYPES)
def test_setitem_every_dtype(dtype):
    kb, tb = make(sample((3, 4), dtype), dtype)
    value = True if dtype == "bool" else 5
    kd, td = getattr(kiln, dtype), getattr(torch, dtype)
    for idx, val in [
        (lambda T: 1, lambda T, d: value),
        (lambda T: (slice(None), 2), lambda T, d: value),
        (lambda T: (slice(None, None, 2), slice(1, 3)), lambda T, d: T.zeros(2, dtype=d)),
        (lambda T: [2, 0], lambda T, d: value),
        (lambda T: (arr(T, [0, 2]), arr(T, [3, 1])), lambda T, d: T.ones(2, dtype=d)),
        (lambda T: arr(T, sample((3, 4), "bool", seed=1), np.bool_), lambda T, d: T.zeros(1, dtype=d)),
        (lambda T: 0, lambda T, d: T.ones(4, dtype=T.float64)),
    ]:
        kb[idx(kiln)] = val(kiln, kd)
        tb[idx(torch)] = val(torch, td)
        check(kb, tb)


def test_setitem_broadcast_and_leading_ones():
    kb, tb = make(A)
    for idx, val in [
        (0, np.ones((1, 1, 4), np.float32)),
        (slice(None), np.arange(4, dtype=np.float32)),
        ((Ellipsis, 0), np.arange(3, dtype=np.float32)),
        ([0], np.ones((1, 1, 3, 4), np.float32)),
        ((slice(None), [0, 2]), np.ones((1, 4), np.float32)),
    ]:
        kb[idx] = kiln.from_numpy(val.copy())
        tb[idx] = torch.from_numpy(val.copy())
        check(kb, tb)


def test_setitem_version_and_aliasing():
    kb, tb = make(A)
    before = kb._version
    kb[0] = 1.0
    assert kb._version > before
    tb[0] = 1.0
    before = kb._version
    kb[[0, 1]] = 2.0
    tb[[0, 1]] = 2.0
    assert kb._version > before
    view = kb[1]
    kb[1, 2] = 8.0
    tb[1, 2] = 8.0
    check(view, tb[1])  # a view sees writes through its base
    view[0] = -1.0
    tb[1, 0] = -1.0
    check(kb, tb)


SETITEM_ERRORS = [
    lambda T, x: x.__setitem__(0, T.ones(3, 5)),
    lambda T, x: x.__setitem__(arr(T, [0]), T.ones(3, 5, dtype=T.float32)),
    lambda T, x: x.__setitem__(arr(T, [0]), T.ones(3, 4, dtype=T.int64)),
    lambda T, x: x.__setitem__(0, "a"),
    lambda T, x: x.__setitem__(5, 1.0),
    lambda T, x: x.__setitem__(slice(None, None, -1), 1.0),
    lambda T, x: x.__delitem__(0),
    lambda T, x: x.__setitem__((0, 0, 0, 0), 1.0),
    lambda T, x: x.__setitem__(arr(T, [7]), 1.0),
    lambda T, x: x.__setitem__(0, None),
]


@pytest.mark.parametrize("i", range(len(SETITEM_ERRORS)))
def test_setitem_errors(i):
    xs = {kiln: make(A)[0], torch: make(A)[1]}
    same_error(lambda T: SETITEM_ERRORS[i](T, xs[T]))


def test_setitem_mask_with_one_value_of_another_dtype():
    # PyTorch routes a single mask with a one-element value to masked_fill_ (no dtype check).
    kb, tb = make(A)
    mask = sample((2, 3, 4), "bool", seed=2)
    kb[arr(kiln, mask, np.bool_)] = arr(kiln, [4])
    tb[arr(torch, mask, np.bool_)] = arr(torch, [4])
    check(kb, tb)


# --- index_put / index_put_ ----------------------------------------------------------------------


@pytest.mark.parametrize("accumulate", [False, True])
@pytest.mark.parametrize("dtype", ["int64", "float32", "float16", "bool"])
def test_index_put(accumulate, dtype):
    kb, tb = make(sample((4, 3), dtype), dtype)
    vals = sample((3, 3), dtype, seed=11)
    kv, tv = make(vals, dtype)
    ki, ti = arr(kiln, [0, 2, 0]), arr(torch, [0, 2, 0])
    check(kiln.index_put(kb, (ki,), kv, accumulate), torch.index_put(tb, (ti,), tv, accumulate))
    check(
        kb.index_put((ki,), kv[0], accumulate=accumulate), tb.index_put((ti,), tv[0], accumulate=accumulate)
    )
    assert kb.index_put_((ki, arr(kiln, [1])), kv[:, 0], accumulate) is kb
    tb.index_put_((ti, arr(torch, [1])), tv[:, 0], accumulate)
    check(kb, tb)


# --- len / iter / index ----------------------------------------------------------------------------


def test_len_iter():
    kb, tb = make(A)
    assert len(kb) == len(tb) == 2
    assert len(kb[0]) == 3
    rows_k, rows_t = list(kb), list(tb)
    assert len(rows_k) == 2
    for rk, rt in zip(rows_k, rows_t):
        check(rk, rt, check_stride=True)
    for rk, rt in zip(tuple(kb[1]), tuple(tb[1])):
        check(rk, rt, check_stride=True)
    for rk, rt in zip(kb[0, 0], tb[0, 0]):
        check(rk, rt)
    e, te = make(np.zeros((0, 3), np.float32))
    assert len(e) == 0 and list(e) == [] and list(te) == []
    s = {kiln: make(np.array(1.0, np.float32))[0], torch: make(np.array(1.0, np.float32))[1]}
    err = same_error(lambda T: len(s[T]))
    assert "len() of a 0-d tensor" in str(err)
    same_error(lambda T: iter(s[T]))


def test_index_protocol():
    k = kiln.from_numpy(np.array(3))
    assert operator.index(k) == 3
    assert list(range(10))[k] == 3
    assert [0, 1, 2, 3][kiln.from_numpy(np.array([2], np.int32))] == 2
    for bad in [np.array(3.0), np.array([1, 2])]:
        with pytest.raises(TypeError):
            operator.index(kiln.from_numpy(bad))
        with pytest.raises(TypeError):
            operator.index(torch.from_numpy(bad))


def test_list_index_warns_like_pytorch():
    kb, _ = make(A)
    with pytest.warns(UserWarning, match="non-tuple sequence"):
        kb[[0, slice(None)]]
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        kb[[0, 1]]  # a plain list of ints is one index tensor: no warning


def test_meta_indexing():
    k = kiln.empty([2, 3, 4], device="meta")
    t = torch.zeros(2, 3, 4)  # PyTorch's CPU result as the reference (its meta kernels load slowly)
    for idx in BASIC[:25]:
        rk, rt = k[idx(kiln)], t[idx(torch)]
        assert rk.is_meta and tuple(rk.shape) == tuple(rt.shape) and tuple(rk.stride()) == tuple(rt.stride())
    for idx in [
        lambda T: (slice(None), arr(T, [0, 2])),
        lambda T: (arr(T, [0, 1]), slice(None), arr(T, [1, 2])),
    ]:
        rk, rt = k[idx(kiln)], t[idx(torch)]
        assert rk.is_meta and tuple(rk.shape) == tuple(rt.shape)


def test_index_put_with_more_indices_than_dims_after_mask_expansion():
    # Regression: a 2-D mask plus another index used to read past self's dims.
    xs = {kiln: make(A[0])[0], torch: make(A[0])[1]}
    mask = np.ones((3, 4), np.bool_)
    same_error(lambda T: T.index_put_(xs[T], (arr(T, mask, np.bool_), arr(T, [0])), T.zeros(1)))
    same_error(lambda T: T.index_put(xs[T], (arr(T, [0]),) * 3, T.zeros(1)))
    same_error(lambda T: xs[T][arr(T, mask, np.bool_), arr(T, [0])])


def test_out_of_range_indices_are_not_checked_when_nothing_is_addressed():
    # Regression (found by fuzzing): PyTorch only bounds-checks indices when the result has elements.
    k, t = make(np.zeros((1, 0), np.float32))
    check(k[arr(kiln, [-3, 1])], t[arr(torch, [-3, 1])])
    k[arr(kiln, [5])] = 1.0
    t[arr(torch, [5])] = 1.0
    check(k, t)


@pytest.mark.parametrize(
    "dtype,value",
    [
        ("uint8", 300),
        ("uint8", -1),
        ("uint8", -1.0),
        ("int8", 1e10),
        ("float16", 1e5),
        ("bool", 7),
        ("float32", 10**30),
        ("float32", 1e300),
        ("int64", 2**70),
        ("int32", float("nan")),
        ("int32", 2.5),
    ],
)
def test_setitem_scalar_range_like_pytorch(dtype, value):
    xs = {kiln: make(np.zeros(3, dtype))[0], torch: make(np.zeros(3, dtype))[1]}
    try:
        xs[torch][0] = value
    except Exception:  # noqa: BLE001 (any PyTorch error: kiln must raise the same type)
        same_error(lambda T: xs[T].__setitem__(0, value))
        return
    xs[kiln][0] = value
    check(xs[kiln], xs[torch])
