"""Reductions, softmax/log_softmax, layer_norm and cumulative scans against PyTorch."""
import math

import numpy as np
import pytest

import kiln
from oracle import ALL_DTYPES, FLOAT_DTYPES, TOL, assert_match, both, dtype_name, need_torch, sample

torch = need_torch()

LAYOUTS = ["contig", "T", "step"]


def make(shape, dtype, layout="contig", seed=0, low=-4, high=4):
    """The same data as (kiln, torch) tensors; non-contiguous layouts share numpy's strides."""
    if layout == "contig" or dtype == "bfloat16":
        return both(sample(shape, dtype, seed, low, high), dtype)
    if layout == "T":
        view = sample(tuple(reversed(shape)), dtype, seed, low, high).T
    else:
        base = sample(tuple(2 * s + 1 for s in shape), dtype, seed, low, high)
        view = base[(slice(1, None, 2),) * len(shape)]
    assert view.shape == tuple(shape) and (len(shape) < 2 or not view.flags.c_contiguous)
    return kiln.from_numpy(view), torch.from_numpy(view)


def match(k, t, rtol=None, atol=None):
    """assert_match that also handles bfloat16 results and named tuples."""
    if isinstance(t, tuple):
        assert isinstance(k, tuple) and len(k) == len(t)
        for a, b in zip(k, t):
            match(a, b, rtol, atol)
        return
    if dtype_name(t) == "bfloat16":
        assert dtype_name(k) == "bfloat16", f"dtype {dtype_name(k)} != expected bfloat16"
        r, a = TOL["bfloat16"]
        k, t = k.to(kiln.float32), t.float()
        rtol, atol = rtol or r, atol or a
    assert_match(k, t, rtol, atol)


def builtin_error(e):
    return next(c for c in type(e).__mro__ if c.__module__ == "builtins")


def check(fn, *tensors, rtol=None, atol=None):
    """fn(T, *args) run with T = torch on the torch tensors and T = kiln on the kiln ones:
    the same result, or the same kind of exception."""
    ks = [p[0] for p in tensors]
    ts = [p[1] for p in tensors]
    try:
        expected = fn(torch, *ts)
    except Exception as e:  # noqa: BLE001 - any torch error must be mirrored
        with pytest.raises(builtin_error(e)):
            fn(kiln, *ks)
        return
    match(fn(kiln, *ks), expected, rtol, atol)


# ---------------------------------------------------------------- sum, mean, prod, all, any


DIMS = [None, 0, -1, (0, 2), (2, 0), (), (0, 1, 2)]


@pytest.mark.parametrize("dtype", ALL_DTYPES)
@pytest.mark.parametrize("op", ["sum", "mean", "prod", "amax", "amin", "all", "any", "logsumexp"])
def test_dim_reductions_every_dtype(op, dtype):
    x = make((3, 4, 5), dtype, low=-2, high=2)
    for dim in DIMS:
        for keepdim in (False, True):
            if dim is None and op in ("amax", "amin", "logsumexp"):
                continue
            if dim is None and op in ("all", "any"):
                check(lambda T, a: getattr(T, op)(a, dim=None, keepdim=keepdim), x)
                continue
            check(lambda T, a: getattr(T, op)(a, dim, keepdim), x, atol=1e-4 if op == "prod" else None)
    if op not in ("amax", "amin", "logsumexp"):
        check(lambda T, a: getattr(T, op)(a), x)
        check(lambda T, a: getattr(a, op)(), x)


@pytest.mark.parametrize("layout", LAYOUTS)
@pytest.mark.parametrize("dtype", ["float32", "int32", "float16", "bool"])
def test_non_contiguous_inputs(layout, dtype):
    x = make((5, 6, 7), dtype, layout)
    for dim in [None, 0, 1, 2, (0, 1), (1, 2), (0, 2)]:
        check(lambda T, a: T.sum(a, dim), x)
        check(lambda T, a: T.any(a, dim), x)
        if dim is not None:
            check(lambda T, a: T.amax(a, dim, True), x)
        if dtype != "bool":
            check(lambda T, a: T.mean(a, dim, dtype=T.float64), x)
    for dim in range(3):
        check(lambda T, a: T.max(a, dim), x)
        check(lambda T, a: T.argmin(a, dim, True), x)
        # PyTorch multiplies float16 in float16; kiln keeps the product in float32.
        check(lambda T, a: T.prod(a, dim), x, rtol=5e-3, atol=1e-3)
    check(lambda T, a: T.argmax(a), x)
    check(lambda T, a: a.max(), x)


@pytest.mark.parametrize("src", ["bool", "int8", "uint8", "float16", "float32"])
@pytest.mark.parametrize("dst", ["bool", "uint8", "int8", "int64", "float16", "bfloat16", "float64"])
def test_sum_prod_dtype_argument(src, dst):
    x = make((4, 6), src, low=-3, high=3)
    check(lambda T, a: T.sum(a, dtype=getattr(T, dst)), x)
    check(lambda T, a: a.sum(1, keepdim=True, dtype=getattr(T, dst)), x)
    check(lambda T, a: T.prod(a, 0, dtype=getattr(T, dst)), x)
    check(lambda T, a: T.mean(a, dtype=getattr(T, dst)), x)
    check(lambda T, a: T.cumsum(a, 1, dtype=getattr(T, dst)), x)


def test_integer_overflow_wraps_like_int64():
    check(lambda T, a: T.sum(a), both(np.array([2**62, 2**62, 2**62], dtype=np.int64)))
    check(lambda T, a: T.prod(a), both(np.array([2**40, 2**40, 3], dtype=np.int64)))
    check(lambda T, a: T.sum(a, dtype=T.int8), both(np.array([100, 100, 100], dtype=np.int8)))


def test_all_any_dims_semantics():
    x = make((2, 3), "uint8", low=0, high=1)
    check(lambda T, a: T.all(a, ()), x)  # an empty tuple reduces nothing for all/any
    check(lambda T, a: T.any(a, (0, 1), True), x)
    check(lambda T, a: T.all(a, dim=None), x)
    check(lambda T, a: a.any(dim=(1,)), x)
    check(lambda T, a: T.all(a), both(np.array([0.0, -0.0, np.nan], dtype=np.float32)))
    check(lambda T, a: T.any(a), both(np.array([0.0, -0.0], dtype=np.float32)))
    check(lambda T, a: T.all(a), both(np.array([np.nan, 1.0], dtype=np.float32)))


# ------------------------------------------------------------------- shapes: 0-d, zero-size


@pytest.mark.parametrize("op", ["sum", "mean", "prod", "amax", "amin", "logsumexp", "all", "any",
                                "max", "min", "argmax", "argmin", "var", "std", "norm", "cumsum",
                                "cumprod", "softmax", "log_softmax"])
def test_zero_dim_tensor(op):
    x = both(np.array(2.5, dtype=np.float32))
    for dim in (0, -1):
        for keepdim in (False, True):
            if op in ("cumsum", "cumprod", "softmax", "log_softmax"):
                check(lambda T, a: getattr(T, op)(a, dim), x)
            elif op == "norm":
                check(lambda T, a: T.norm(a, 2, dim, keepdim), x)
            else:
                check(lambda T, a: getattr(T, op)(a, dim, keepdim), x)
    check(lambda T, a: getattr(T, op)(a, 1), x)  # IndexError
    if op not in ("logsumexp", "cumsum", "cumprod", "softmax", "log_softmax"):
        check(lambda T, a: getattr(T, op)(a), x)


@pytest.mark.parametrize("op", ["sum", "mean", "prod", "amax", "amin", "logsumexp", "all", "any",
                                "max", "min", "argmax", "argmin", "var", "std", "norm",
                                "var_mean", "std_mean"])
@pytest.mark.parametrize("shape", [(0, 3), (3, 0), (2, 0, 4)])
def test_zero_size_dims(op, shape):
    x = make(shape, "float32")
    check(lambda T, a: getattr(T, op)(a), x)
    for dim in range(len(shape)):
        check(lambda T, a: getattr(T, op)(a, dim), x)
        check(lambda T, a: getattr(T, op)(a, dim, True), x)
    if op not in ("max", "min", "argmax", "argmin"):
        check(lambda T, a: getattr(T, op)(a, tuple(range(len(shape)))), x)


def test_zero_size_messages():
    k = kiln.from_numpy(np.zeros((0, 3), dtype=np.float32))
    with pytest.raises(IndexError, match="Expected reduction dim 0 to have non-zero size"):
        kiln.max(k, 0)
    with pytest.raises(RuntimeError, match="Expected reduction dim to be specified"):
        kiln.amax(k)
    with pytest.raises(IndexError, match="Expected reduction dim to be specified"):
        kiln.argmax(k)
    with pytest.raises(RuntimeError, match="cannot compute the inf norm"):
        kiln.norm(k, float("inf"))


# ------------------------------------------------------------------------- errors and args


def test_dim_errors():
    x = make((2, 3), "float32")
    check(lambda T, a: T.sum(a, (0, 0)), x)
    check(lambda T, a: T.sum(a, (0, -2)), x)
    check(lambda T, a: T.amax(a, (1, -1)), x)
    check(lambda T, a: T.sum(a, 2), x)
    check(lambda T, a: T.mean(a, -3), x)
    check(lambda T, a: T.max(a, 5), x)
    check(lambda T, a: T.argmax(a, 2), x)
    check(lambda T, a: T.logsumexp(a, (0, 0)), x)
    check(lambda T, a: T.logsumexp(a, ()), x)
    check(lambda T, a: T.softmax(a, 2), x)
    check(lambda T, a: T.cumsum(a, -3), x)
    check(lambda T, a: T.prod(a, (0, 1)), x)  # TypeError: prod takes one dim
    check(lambda T, a: T.sum(a, dim=0.5), x)
    with pytest.raises(RuntimeError, match="dim 0 appears multiple times"):
        kiln.sum(x[0], (0, -2))


@pytest.mark.parametrize("dtype", ["bool", "uint8", "int64"])
def test_dtype_errors(dtype):
    x = make((2, 3), dtype, low=0, high=3)
    for fn in [lambda T, a: T.mean(a), lambda T, a: T.mean(a, 0, dtype=T.int64),
               lambda T, a: T.var(a), lambda T, a: T.std(a, 0), lambda T, a: T.var_mean(a),
               lambda T, a: T.norm(a), lambda T, a: T.norm(a, dtype=T.float32),
               lambda T, a: T.softmax(a, 0), lambda T, a: T.log_softmax(a, 1),
               lambda T, a: T.layer_norm(a, [3]), lambda T, a: T.argmax(a),
               lambda T, a: T.argmin(a, 0), lambda T, a: T.cumsum(a, 0, dtype=T.bool),
               lambda T, a: T.cumprod(a, 0, dtype=T.bool), lambda T, a: T.logsumexp(a, 1),
               lambda T, a: T.mean(a, dtype=T.float16)]:
        check(fn, x)
    with pytest.raises(RuntimeError, match="could not infer output dtype"):
        kiln.mean(x[0])


def test_named_tuple_results():
    k, t = make((3, 4), "float32")
    r = kiln.max(k, 1, keepdim=True)
    assert type(r).__name__ == "max" and len(r) == 2
    match(r.values, torch.max(t, 1, keepdim=True).values)
    match(r.indices, torch.max(t, 1, keepdim=True).indices)
    v, i = k.min(dim=0)
    match((v, i), tuple(t.min(dim=0)))
    check(lambda T, a: T.var_mean(a, 1), (k, t))


def test_meta_tensors():
    m = kiln.empty([2, 3, 4], device="meta")
    i = kiln.empty([2, 3, 4], dtype=kiln.int32, device="meta")
    cases = [(m.sum(1), (2, 4), "float32"), (i.sum(), (), "int64"),
             (m.mean((0, 2), True), (1, 3, 1), "float32"),
             (m.amax(-1), (2, 3), "float32"), (m.max(0).indices, (3, 4), "int64"),
             (i.argmax(keepdim=True), (1, 1, 1), "int64"), (m.var(1), (2, 4), "float32"),
             (kiln.norm(m, dim=2), (2, 3), "float32"), (m.logsumexp(0), (3, 4), "float32"),
             (i.all(2), (2, 3), "bool"), (m.softmax(1), (2, 3, 4), "float32"),
             (kiln.layer_norm(m, [4]), (2, 3, 4), "float32"), (i.cumsum(1), (2, 3, 4), "int64"),
             (kiln.std_mean(m, 0)[1], (3, 4), "float32")]
    for t, shape, dtype in cases:
        assert t.device.type == "meta" and tuple(t.shape) == shape and dtype_name(t) == dtype


# -------------------------------------------------------------------- max/min, arg, NaN, ties


@pytest.mark.parametrize("dtype", ALL_DTYPES)
def test_max_min_with_indices(dtype):
    x = make((4, 5, 3), dtype, low=-2, high=2)  # small range: many ties
    for dim in (0, 1, 2, -1):
        for keepdim in (False, True):
            check(lambda T, a: T.max(a, dim, keepdim), x)
            check(lambda T, a: T.min(a, dim=dim, keepdim=keepdim), x)
            check(lambda T, a: T.argmax(a, dim, keepdim), x)
            check(lambda T, a: a.argmin(dim=dim, keepdim=keepdim), x)
    check(lambda T, a: T.argmax(a, keepdim=True), x)
    check(lambda T, a: T.argmin(a, dim=None), x)
    check(lambda T, a: T.max(a), x)
    check(lambda T, a: a.min(), x)


def test_binary_max_min_overloads():
    x = both(np.array([[1.0, np.nan, -2.0], [4.0, 0.5, 3.0]], dtype=np.float32))
    y = both(np.array([2.0, 2.0, np.nan], dtype=np.float32))
    i = make((2, 3), "int32", seed=3)
    for op in ("max", "min"):
        check(lambda T, a, b: getattr(T, op)(a, b), x, y)  # broadcasting, NaN propagates
        check(lambda T, a, b: getattr(a, op)(other=b), x, i)  # promotion to float
        check(lambda T, a: getattr(T, op)(a, 1), x)  # a number names a dim
        check(lambda T, a: getattr(a, op)(-1, True), i)


@pytest.mark.parametrize("n", [7, 100, 70000])
def test_nan_and_ties(n):
    a = np.zeros(n, dtype=np.float32)
    a[n // 3] = 5
    a[2 * n // 3] = 5
    a[n - 1] = -5
    a[n // 5] = -5
    x = both(a)
    for op in ("argmax", "argmin", "amax", "amin"):
        check(lambda T, v: getattr(T, op)(v, 0), x)
    check(lambda T, v: T.max(v, 0), x)
    b = a.copy()
    b[n // 2] = np.nan
    b[n - 2] = np.nan
    y = both(b)
    for op in ("argmax", "argmin", "amax", "amin", "max", "min"):
        check(lambda T, v: getattr(T, op)(v), y)
        check(lambda T, v: getattr(T, op)(v, 0), y)
    check(lambda T, v: T.norm(v, float("inf")), y)
    check(lambda T, v: T.sum(v), y)
    # Along dim 0 of [n, 3]: the lanes are neighbouring outputs.
    m = np.stack([a, b, a[::-1].copy()], axis=1)
    for op in ("argmax", "argmin", "max", "min", "amax"):
        check(lambda T, v: getattr(T, op)(v, 0), both(m))
        check(lambda T, v: getattr(T, op)(v, 1), both(m))


def test_infinities():
    inf = np.inf
    a = both(np.array([[-inf, -inf, 1], [inf, -inf, 2], [inf, inf, -inf]], dtype=np.float32))
    for op in ("argmax", "argmin", "amax", "amin", "logsumexp", "sum", "softmax", "log_softmax"):
        check(lambda T, v: getattr(T, op)(v, 1), a)
        check(lambda T, v: getattr(T, op)(v, 0), a)
    check(lambda T, v: T.norm(v, 2, 1), a)
    check(lambda T, v: T.norm(v, 0, 0), a)


# --------------------------------------------------------------------------- var and std


@pytest.mark.parametrize("dtype", FLOAT_DTYPES)
@pytest.mark.parametrize("op", ["var", "std", "var_mean", "std_mean"])
def test_var_std_overloads(op, dtype):
    x = make((4, 5, 6), dtype)
    calls = [
        lambda T, a: getattr(T, op)(a),
        lambda T, a: getattr(T, op)(a, False),
        lambda T, a: getattr(T, op)(a, unbiased=False),
        lambda T, a: getattr(T, op)(a, 1),
        lambda T, a: getattr(T, op)(a, (0, 2), False, True),
        lambda T, a: getattr(T, op)(a, dim=-1, keepdim=True),
        lambda T, a: getattr(T, op)(a, dim=None),
        lambda T, a: getattr(T, op)(a, ()),
        lambda T, a: getattr(T, op)(a, 1, correction=0),
        lambda T, a: getattr(T, op)(a, 1, correction=2.5, keepdim=True),
        lambda T, a: getattr(T, op)(a, correction=-1),
        lambda T, a: getattr(T, op)(a, (0, 1), correction=True),
        lambda T, a: getattr(T, op)(a, 1, correction=6),  # no degrees of freedom: inf
        lambda T, a: getattr(T, op)(a, 1, correction=9),
    ]
    if op in ("var", "std"):
        calls += [lambda T, a: getattr(a, op)(0, True, True), lambda T, a: getattr(a, op)(correction=0)]
    for fn in calls:
        check(fn, x)


def test_var_accuracy_with_large_offset():
    r = np.random.default_rng(3)
    a = (1e4 + r.standard_normal(200000)).astype(np.float32)
    check(lambda T, v: T.var(v), both(a), rtol=1e-4)
    check(lambda T, v: T.std(v, 0), both(a.reshape(400, 500)), rtol=1e-4)
    check(lambda T, v: T.std(v, 1), both(a.reshape(400, 500)), rtol=1e-4)
    ref = np.var(a.astype(np.float64), ddof=1)
    assert abs(kiln.var(kiln.from_numpy(a)).item() - ref) / ref < 1e-5


# ------------------------------------------------------------------------------------ norm


@pytest.mark.parametrize("dtype", FLOAT_DTYPES)
def test_norm(dtype):
    x = make((3, 4, 5), dtype)
    ps = [None, 2, 1, 0, 3, 0.5, -1, -0.5, float("inf"), float("-inf"), "fro"]
    for p in ps:
        check(lambda T, a: T.norm(a, p), x)
        check(lambda T, a: T.norm(a, p, 1), x)
        check(lambda T, a: a.norm(p, (0, 2), True), x)
        check(lambda T, a: T.norm(a, p=p, dim=-1, keepdim=False), x)
    check(lambda T, a: T.norm(a, dim=(0, 1, 2)), x)
    check(lambda T, a: T.norm(a, "fro", (0, 1, 2)), x)  # matrix_norm: RuntimeError
    check(lambda T, a: T.norm(a, "abc"), x)
    check(lambda T, a: T.norm(a, 2, ()), x)
    for dt in ("float16", "float32", "float64", "int64"):
        check(lambda T, a: T.norm(a, 2, 1, dtype=getattr(T, dt)), x)


@pytest.mark.parametrize("layout", LAYOUTS)
def test_norm_non_contiguous(layout):
    x = make((6, 7), "float32", layout)
    for p in (2, 1, float("inf"), 3):
        check(lambda T, a: T.norm(a, p, 0), x)
        check(lambda T, a: T.norm(a, p, 1), x)
        check(lambda T, a: T.norm(a, p), x)


# ------------------------------------------------------------------------------- logsumexp


@pytest.mark.parametrize("dtype", ALL_DTYPES)
def test_logsumexp_dtypes_and_stability(dtype):
    x = make((3, 4, 5), dtype, low=-3, high=3)
    for dim in (0, 2, (0, 1), (0, 1, 2), [-1]):
        check(lambda T, a: T.logsumexp(a, dim), x)
        check(lambda T, a: a.logsumexp(dim, keepdim=True), x)
    if dtype in ("float32", "float64"):
        big = make((3, 50), dtype, low=500, high=800)
        check(lambda T, a: T.logsumexp(a, 1), big)
        check(lambda T, a: T.logsumexp(a * -1, 1), big)


# ---------------------------------------------------------------------- softmax/log_softmax


@pytest.mark.parametrize("dtype", FLOAT_DTYPES)
@pytest.mark.parametrize("op", ["softmax", "log_softmax"])
def test_softmax_dims_dtypes(op, dtype):
    x = make((3, 4, 37), dtype)
    for dim in (0, 1, 2, -1):
        check(lambda T, a: getattr(T, op)(a, dim), x)
        check(lambda T, a: getattr(a, op)(dim=dim), x)
    check(lambda T, a: getattr(T, op)(a, 1, dtype=T.float64), x)
    check(lambda T, a: getattr(T, op)(a, 0, T.float32), x)


@pytest.mark.parametrize("layout", LAYOUTS)
@pytest.mark.parametrize("op", ["softmax", "log_softmax"])
def test_softmax_layouts_and_stability(op, layout):
    x = make((5, 33), "float32", layout, low=-1000, high=1000)
    for dim in (0, 1):
        check(lambda T, a: getattr(T, op)(a, dim), x)
    check(lambda T, a: getattr(T, op)(a, 0, T.float64), make((4, 3), "int32"))
    check(lambda T, a: getattr(T, op)(a, 1), make((0, 3), "float32"))
    check(lambda T, a: getattr(T, op)(a, 0), make((2, 0), "float32"))
    big = make((64, 600), "float32", seed=2)
    check(lambda T, a: getattr(T, op)(a, 1), big)
    check(lambda T, a: getattr(T, op)(a, 0), big)


# ------------------------------------------------------------------------------- layer_norm


@pytest.mark.parametrize("dtype", FLOAT_DTYPES)
def test_layer_norm(dtype):
    x = make((4, 5, 37), dtype)
    w = make((37,), dtype, seed=1)
    b = make((37,), dtype, seed=2)
    check(lambda T, a: T.layer_norm(a, [37]), x)
    check(lambda T, a, g, c: T.layer_norm(a, (37,), g, c), x, w, b)
    check(lambda T, a, g: T.layer_norm(a, [37], g, eps=1e-3), x, w)
    check(lambda T, a, c: T.layer_norm(a, [37], bias=c), x, b)
    w2 = make((5, 37), dtype, seed=3)
    check(lambda T, a, g: T.layer_norm(a, [5, 37], g, None, 0.1), x, w2)
    check(lambda T, a: T.layer_norm(a, [4, 5, 37]), x)
    if dtype in ("float16", "bfloat16"):  # 16-bit input with float32 parameters
        wf, bf = make((37,), "float32", seed=1), make((37,), "float32", seed=2)
        check(lambda T, a, g, c: T.layer_norm(a, [37], g, c), x, wf, bf)
        check(lambda T, a, g, c: T.layer_norm(a, [37], g, c), x, wf, b)  # mixed: error


def test_layer_norm_layouts_and_errors():
    for layout in LAYOUTS:
        check(lambda T, a: T.layer_norm(a, [6]), make((5, 6), "float32", layout))
    x = make((2, 3), "float32")
    check(lambda T, a: T.layer_norm(a, [2]), x)
    check(lambda T, a: T.layer_norm(a, [1, 3]), x)
    check(lambda T, a: T.layer_norm(a, []), x)
    check(lambda T, a: T.layer_norm(a, 3), x)
    check(lambda T, a, g: T.layer_norm(a, [3], g), x, make((2,), "float32"))
    check(lambda T, a, g: T.layer_norm(a, [3], None, g), x, make((3,), "float64"))
    check(lambda T, a, g: T.layer_norm(a, [3], g), x, make((3,), "float16"))
    check(lambda T, a, g, c: T.layer_norm(a, [3], g, c), make((2, 3), "float64"),
          make((3,), "float64"), make((3,), "float32"))
    check(lambda T, a: T.layer_norm(a, [3], eps=-1.0), x)
    check(lambda T, a: T.layer_norm(a, [3]), both(np.ones((2, 3), dtype=np.float32)))
    check(lambda T, a: T.layer_norm(a, [3]), make((0, 3), "float32"))
    check(lambda T, a: T.layer_norm(a, [0]), make((2, 0), "float32"))
    check(lambda T, a: T.layer_norm(a, [1]), both(np.array(1.0, dtype=np.float32)))
    big = make((16, 3000), "float32", seed=5, low=100, high=104)  # mean far from 0
    check(lambda T, a: T.layer_norm(a, [3000]), big, rtol=1e-4, atol=1e-4)


# ---------------------------------------------------------------------------- cumsum/cumprod


@pytest.mark.parametrize("dtype", ALL_DTYPES)
@pytest.mark.parametrize("op", ["cumsum", "cumprod"])
def test_cumulative(op, dtype):
    x = make((3, 4, 5), dtype, low=-2, high=2)
    for dim in (0, 1, 2, -1):
        check(lambda T, a: getattr(T, op)(a, dim), x, atol=1e-3)
        check(lambda T, a: getattr(a, op)(dim=dim), x, atol=1e-3)
    check(lambda T, a: getattr(T, op)(a, 1, dtype=T.float64), x)


@pytest.mark.parametrize("layout", LAYOUTS)
def test_cumulative_layouts(layout):
    x = make((6, 7), "float32", layout, low=0.5, high=1.5)
    for dim in (0, 1):
        check(lambda T, a: T.cumsum(a, dim), x)
        check(lambda T, a: T.cumprod(a, dim), x)
    check(lambda T, a: T.cumsum(a, 0), make((0, 3), "int16"))


@pytest.mark.parametrize("dtype", ALL_DTYPES)
@pytest.mark.parametrize("op", ["cummax", "cummin", "logcumsumexp"])
def test_running_extrema_and_logcumsumexp(op, dtype):
    # Integers in [-2, 2] repeat, so cummax/cummin meet ties (the later index wins, as PyTorch's);
    # logcumsumexp of integers raises in both.
    x = make((3, 4, 5), dtype, low=-2, high=2)
    for dim in (0, 1, -1):
        check(lambda T, a: getattr(T, op)(a, dim), x, atol=1e-3)
        check(lambda T, a: getattr(a, op)(dim=dim), x, atol=1e-3)
    for layout in ("T", "step"):
        check(lambda T, a: getattr(T, op)(a, 1), make((6, 7), "float32", layout))


def test_running_extrema_ties_nan_and_edges():
    nan, inf = float("nan"), float("inf")
    rows = [[1.0, 3.0, 3.0, nan, 2.0, nan, 5.0], [-inf, -inf, 0.0, inf, inf, -1.0, inf],
            [2.0, 2.0, 2.0, 2.0, 1.0, 1.0, 3.0]]
    x = both(np.array(rows, np.float32), "float32")
    for op in ("cummax", "cummin", "logcumsumexp"):
        check(lambda T, a: getattr(T, op)(a, 1), x)
        check(lambda T, a: getattr(T, op)(a, 0), x)
    # logcumsumexp keeps a running value far outside exp's range, in double for float32.
    big = both(np.array([[1000.0, -1000.0, 1000.0, 88.0], [-1e4, -1e4, -1e4, 0.0]], np.float32), "float32")
    check(lambda T, a: T.logcumsumexp(a, 1), big)
    for op in ("cummax", "cummin", "logcumsumexp"):
        check(lambda T, a: getattr(T, op)(a, 0), both(np.array(2.5, np.float32), "float32"))
        check(lambda T, a: getattr(T, op)(a, 1), make((2, 0), "float32"))
        check(lambda T, a: getattr(T, op)(a, 2), make((2, 3), "float32"))


# ---------------------------------------------------------- accuracy, large and parallel cases


def test_float32_sum_accuracy_matches_pytorch():
    r = np.random.default_rng(7)
    for a in (r.uniform(0, 1, 1_000_000).astype(np.float32),
              (r.standard_normal(1_000_000) * 100).astype(np.float32)):
        ref = a.astype(np.float64).sum()
        k = kiln.sum(kiln.from_numpy(a)).item()
        t = torch.sum(torch.from_numpy(a)).item()
        scale = np.abs(a.astype(np.float64)).sum()
        # PyTorch's cascade keeps the error near float32 rounding; a naive loop would be ~100x off.
        assert abs(k - ref) <= max(4 * abs(t - ref), 1e-6 * scale), (k, t, ref)
        km = kiln.mean(kiln.from_numpy(a)).item()
        assert abs(km - ref / a.size) <= max(4 * abs(torch.mean(torch.from_numpy(a)).item() - ref / a.size),
                                             1e-6 * scale / a.size)


@pytest.mark.parametrize("dtype", ["float16", "bfloat16"])
def test_16bit_sums_accumulate_in_float(dtype):
    x = make((100_000,), dtype, low=0, high=1)
    check(lambda T, a: T.sum(a), x)
    check(lambda T, a: T.mean(a), x)
    check(lambda T, a: T.norm(a), x)
    check(lambda T, a: T.var(a), x)


@pytest.mark.parametrize("shape,dims", [
    ((1000, 300), 1),            # many outputs, contiguous rows
    ((300, 1000), 0),            # lanes over neighbouring outputs
    ((3, 200_000), 1),           # few outputs: the reduced range is split
    ((200_000, 3), 0),           # few outputs along the outer dim
    ((2, 500, 70), (0, 2)),      # two reduced dims that do not coalesce
    ((60, 7, 600), (0, 2)),
    ((300, 3, 400), (0, 2)),     # few outputs, runs split across threads mid-run
    ((400_000,), 0),
])
def test_large_reductions(shape, dims):
    x = make(shape, "float32", seed=4)
    check(lambda T, a: T.sum(a, dims), x, atol=1e-3)
    check(lambda T, a: T.amax(a, dims), x)
    check(lambda T, a: T.var(a, dims), x, rtol=1e-4)
    check(lambda T, a: T.logsumexp(a, dims), x)
    check(lambda T, a: T.any(a, dims), x)
    if isinstance(dims, int):
        check(lambda T, a: T.argmin(a, dims), x)
        check(lambda T, a: T.max(a, dims), x)
    i = make(shape, "int64", seed=4)
    check(lambda T, a: T.sum(a, dims), i)


def test_large_non_contiguous():
    # Reduced dims that do not coalesce, neighbouring outputs as lanes, few outputs.
    view = sample((300, 500, 4), "float32", seed=8)[:, :400, :3]
    x = kiln.from_numpy(view), torch.from_numpy(view)
    check(lambda T, a: T.sum(a, (0, 1)), x, atol=1e-3)
    check(lambda T, a: T.amin(a, (0, 1)), x)
    check(lambda T, a: T.var(a, (1, 0)), x)
    base = sample((1000, 700), "float32", seed=9)
    for view in (base.T, base[::3, 1::2], base[:, :500]):
        x = kiln.from_numpy(view), torch.from_numpy(view)
        for dim in (None, 0, 1, (0, 1)):
            check(lambda T, a: T.sum(a, dim), x, atol=1e-3)
        check(lambda T, a: T.argmax(a), x)
        check(lambda T, a: T.argmax(a, 0), x)
        check(lambda T, a: T.softmax(a, 0), x)
        check(lambda T, a: T.cumsum(a, 1), x, rtol=1e-4, atol=1e-3)


def test_expanded_and_view_inputs():
    # Zero strides (expand) and views made by kiln itself rather than numpy.
    x = make((4, 1), "float32")
    for fn in (lambda T, a: a.expand(4, 50000).sum(1), lambda T, a: a.expand(4, 3000).sum(),
               lambda T, a: a.expand(4, 3000).argmax(), lambda T, a: T.max(a.expand(4, 9), 1),
               lambda T, a: a.expand(4, 9).t().softmax(0), lambda T, a: a.expand(4, 9).var(0)):
        check(fn, x)
    y = make((6, 8, 5), "float32", seed=2)
    for fn in (lambda T, a: a.transpose(0, 2)[1:, ::2].sum((0, 2)),
               lambda T, a: a[::2, 1].amax(-1, True), lambda T, a: a.reshape(48, 5).t().logsumexp(1),
               lambda T, a: T.layer_norm(a.transpose(1, 2), [8]), lambda T, a: a[:, ::3].cumsum(1)):
        check(fn, y)


def test_sum_dim_keyword_forms():
    x = make((2, 3, 4), "float32")
    check(lambda T, a: T.sum(a, dim=[0, 2], keepdim=True), x)
    check(lambda T, a: T.sum(input=a, dim=1), x)
    check(lambda T, a: a.sum(dim=None), x)
    check(lambda T, a: a.sum((), dtype=T.float64), x)
    check(lambda T, a: a.amax(), x)
    check(lambda T, a: a.prod(-1, True), x)
    check(lambda T, a: a.argmax(1), x)
    check(lambda T, a: a.all(-1, True), x)
    assert math.isnan(kiln.mean(kiln.from_numpy(np.zeros(0, dtype=np.float32))).item())
