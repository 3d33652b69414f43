"""Pointwise ops against PyTorch: every dtype, promotion across dtype pairs, Python numbers,
broadcasting, strided views, empty and 0-d tensors, special values, in-place forms and errors."""
import numpy as np
import pytest

import kiln
from oracle import ALL_DTYPES, FLOAT_DTYPES, INT_DTYPES, assert_match, both, need_torch, sample

torch = need_torch()
F = torch.nn.functional


def outcome(fn):
    try:
        return fn(), None
    except Exception as e:  # noqa: BLE001 - the exception itself is what is compared
        return None, e


def compare(kfn, tfn, check_stride=False):
    """kfn() and tfn() give the same result, or raise the same exception type."""
    t_res, t_err = outcome(tfn)
    k_res, k_err = outcome(kfn)
    if t_err is not None:
        assert k_err is not None, f"torch raised {type(t_err).__name__}({t_err}); kiln returned {k_res}"
        assert type(k_err) is type(t_err), (
            f"kiln raised {type(k_err).__name__}({k_err}); torch raised {type(t_err).__name__}({t_err})")
        return
    assert k_err is None, f"kiln raised {type(k_err).__name__}: {k_err}; torch gave {t_res}"
    match(k_res, t_res, check_stride)


def match(k, t, check_stride=False):
    """assert_match, with bfloat16 results compared through float32 (exactly representable)."""
    if hasattr(t, "dtype") and t.dtype == torch.bfloat16:
        assert k.dtype == kiln.bfloat16, f"dtype {k.dtype} != expected bfloat16"
        if check_stride:
            assert tuple(k.stride()) == tuple(t.stride()), f"stride {k.stride()} != {t.stride()}"
        return assert_match(k.to(kiln.float32), t.float(), rtol=1.6e-2, atol=1e-2)
    assert_match(k, t, check_stride=check_stride)


def same(fn, *inputs, check_stride=False):
    """fn(lib, *tensors) agrees for lib = kiln and torch; inputs are arrays or (array, dtype)."""
    ks, ts = [], []
    for inp in inputs:
        a, d = inp if isinstance(inp, tuple) else (inp, None)
        k, t = both(a, d)
        ks.append(k)
        ts.append(t)
    compare(lambda: fn(kiln, *ks), lambda: fn(torch, *ts), check_stride)


def views(a, view):
    """The same numpy view of `a` as a kiln and a torch tensor (shared strides)."""
    v = view(a)
    return kiln.from_numpy(v), torch.from_numpy(v)


def nonzero(a):
    """`a` with zeros replaced by one (divisors)."""
    a = a.copy()
    a[a == 0] = 1
    return a


def failures(cases):
    """Runs (label, check) pairs and returns the labels of those that fail, with the reason."""
    bad = []
    for label, check in cases:
        try:
            check()
        except Exception as e:  # noqa: BLE001 - every failure is reported with its label
            lines = [ln for ln in str(e).splitlines() if ln.strip()]
            bad.append(f"{label}: {' | '.join(lines[:6])}")
    return bad


def nn_or(lib):
    """torch.nn.functional for the ops PyTorch keeps there (gelu, silu); kiln has them at top level."""
    return F if lib is torch else kiln


UNARY = {
    "abs": lambda T, x: T.abs(x),
    "neg": lambda T, x: T.neg(x),
    "negative": lambda T, x: x.negative(),
    "positive": lambda T, x: T.positive(x),
    "exp": lambda T, x: T.exp(x),
    "exp2": lambda T, x: T.exp2(x),
    "expm1": lambda T, x: x.expm1(),
    "log": lambda T, x: T.log(x),
    "log2": lambda T, x: T.log2(x),
    "log10": lambda T, x: x.log10(),
    "log1p": lambda T, x: T.log1p(x),
    "sqrt": lambda T, x: T.sqrt(x),
    "rsqrt": lambda T, x: T.rsqrt(x),
    "sin": lambda T, x: T.sin(x),
    "cos": lambda T, x: x.cos(),
    "tan": lambda T, x: T.tan(x),
    "asin": lambda T, x: T.asin(x),
    "acos": lambda T, x: T.acos(x),
    "atan": lambda T, x: T.atan(x),
    "sinh": lambda T, x: T.sinh(x),
    "cosh": lambda T, x: T.cosh(x),
    "tanh": lambda T, x: x.tanh(),
    "sigmoid": lambda T, x: T.sigmoid(x),
    "erf": lambda T, x: T.erf(x),
    "erfinv": lambda T, x: T.erfinv(x),
    "floor": lambda T, x: T.floor(x),
    "ceil": lambda T, x: x.ceil(),
    "round": lambda T, x: T.round(x),
    "round_decimals": lambda T, x: T.round(x, decimals=2),
    "round_negative_decimals": lambda T, x: x.round(decimals=-1),
    "trunc": lambda T, x: T.trunc(x),
    "sign": lambda T, x: T.sign(x),
    "reciprocal": lambda T, x: T.reciprocal(x),
    "square": lambda T, x: T.square(x),
    "isnan": lambda T, x: T.isnan(x),
    "isinf": lambda T, x: T.isinf(x),
    "isfinite": lambda T, x: x.isfinite(),
    "nan_to_num": lambda T, x: T.nan_to_num(x),
    "logical_not": lambda T, x: T.logical_not(x),
    "bitwise_not": lambda T, x: T.bitwise_not(x),
    "relu": lambda T, x: T.relu(x),
    "gelu": lambda T, x: nn_or(T).gelu(x),
    "gelu_tanh": lambda T, x: nn_or(T).gelu(x, approximate="tanh"),
    "silu": lambda T, x: nn_or(T).silu(x),
}

# Ops whose in-place form is a method x.op_().
UNARY_INPLACE = ["abs", "neg", "negative", "exp", "exp2", "expm1", "log", "log2", "log10", "log1p",
                 "sqrt", "rsqrt", "sin", "cos", "tan", "asin", "acos", "atan", "sinh", "cosh", "tanh",
                 "sigmoid", "erf", "erfinv", "floor", "ceil", "round", "trunc", "sign", "reciprocal", "square",
                 "nan_to_num", "logical_not", "bitwise_not", "relu"]


@pytest.mark.parametrize("op", list(UNARY))
def test_unary_every_dtype(op):
    fn = UNARY[op]
    bad = failures((d, lambda d=d: same(fn, (sample((3, 4), d, seed=1), d))) for d in ALL_DTYPES)
    assert not bad, bad


@pytest.mark.parametrize("op", list(UNARY))
def test_unary_views_empty_and_0d(op):
    fn = UNARY[op]
    a = sample((4, 6), "float32", seed=2)
    for view in (lambda v: v.T, lambda v: v[:, ::2], lambda v: v[1:3, 1:]):
        k, t = views(a, view)
        compare(lambda: fn(kiln, k), lambda: fn(torch, t), check_stride=op != "positive")
    same(fn, (np.zeros((0, 3), np.float32), "float32"))
    same(fn, (np.array(-1.25, np.float32), "float32"))
    same(fn, (np.array(3, np.int64), "int64"))


SPECIAL = np.array([np.nan, np.inf, -np.inf, 0.0, -0.0, 1e-30, -1e-30, 1e30, -1e30, 0.5, -0.5, 1.5,
                    2.5, -2.5, 1.0, -1.0, 88.0, -104.0, 700.0, 65504.0, 3.4e38], dtype=np.float64)


@pytest.mark.parametrize("dtype", FLOAT_DTYPES)
def test_unary_special_values(dtype):
    with np.errstate(over="ignore"):
        a = SPECIAL.astype(np.float32 if dtype == "bfloat16" else dtype)
    ops = [o for o in UNARY if o != "bitwise_not"]
    # PyTorch's vectorized erf gives gelu(+inf) = nan, its scalar path inf; kiln gives inf.
    finite_top = a[~(a > 6e4)]
    bad = failures((op, lambda op=op: same(UNARY[op], (finite_top if op == "gelu" else a, dtype)))
                   for op in ops)
    assert not bad, bad


def test_nan_to_num_arguments():
    a = SPECIAL.astype(np.float32)
    for kw in ({"nan": 1.5}, {"posinf": 7.0}, {"neginf": -3.0}, {"nan": 0.0, "posinf": 1e300},
               {"nan": 2, "posinf": 3, "neginf": -4}):
        for d in ("float32", "float64", "float16", "bfloat16"):
            same(lambda T, x: T.nan_to_num(x, **kw), (a, d))
            same(lambda T, x: x.clone().nan_to_num_(**kw), (a, d))
    same(lambda T, x: T.nan_to_num(x, 1.0, 2.0, 3.0), (a, "float64"))
    same(lambda T, x: T.nan_to_num(x, nan=1.5), (np.array([1, 2], np.int32), "int32"))


@pytest.mark.parametrize("decimals", [-2, -1, 0, 1, 3])
def test_round_decimals(decimals):
    a = np.array([0.125, 1.2345, -2.5, 12345.678, 0.5, 1.5, -0.05, 1e30, np.nan], np.float64)
    for d in FLOAT_DTYPES:
        same(lambda T, x: T.round(x, decimals=decimals), (a.astype(np.float32), d))
        same(lambda T, x: x.clone().round_(decimals=decimals), (a.astype(np.float32), d))


@pytest.mark.parametrize("op", UNARY_INPLACE)
def test_unary_inplace(op):
    def run(T, x):
        y = getattr(x, op + "_")()
        assert y is x
        return y

    bad = failures((d, lambda d=d: same(run, (sample((2, 3), d, seed=3), d))) for d in ALL_DTYPES)
    assert not bad, bad


def test_unary_inplace_function_forms():
    for name in ("relu_", "exp_", "abs_", "sigmoid_", "tanh_", "clamp_", "round_"):
        args = (0.0, 1.0) if name == "clamp_" else ()
        same(lambda T, x: getattr(T, name)(x.clone(), *args), (sample((5,), "float32"), "float32"))
    same(lambda T, x: nn_or(T).gelu(x) if T is torch else T.gelu_(x.clone()), (sample((5,), "float32"), "float32"))
    same(lambda T, x: nn_or(T).silu(x) if T is torch else T.silu_(x.clone()), (sample((5,), "float64"), "float64"))


def test_unary_inplace_errors():
    k = kiln.from_numpy(np.array([1, 2, 3]))
    with pytest.raises(RuntimeError, match="result type Float can't be cast to the desired output type Long"):
        k.exp_()
    with pytest.raises(RuntimeError, match="result type Long can't be cast to the desired output type Bool"):
        kiln.from_numpy(np.array([True])).square_()
    # An expanded tensor has several elements at one address: writing it is refused.
    e = kiln.from_numpy(np.broadcast_to(np.arange(3.0), (2, 3)))
    with pytest.raises(RuntimeError, match="more than one element"):
        e.neg_()


def test_unary_errors_match_torch():
    b = np.array([True, False])
    f = np.array([1.5, -2.0], np.float32)
    for fn, a in [(lambda T, x: T.neg(x), b), (lambda T, x: T.abs(x), b),
                  (lambda T, x: T.floor(x), b), (lambda T, x: T.relu(x), b), (lambda T, x: T.positive(x), b),
                  (lambda T, x: T.bitwise_not(x), f),
                  (lambda T, x: T.round(x, decimals=1), np.array([1, 2])),
                  (lambda T, x: nn_or(T).gelu(x, approximate="fast"), f),
                  (lambda T, x: nn_or(T).gelu(x), np.array([1, 2])),
                  (lambda T, x: nn_or(T).silu(x), np.array([1, 2]))]:
        t_res, t_err = outcome(lambda: fn(torch, both(a)[1]))
        assert t_err is not None
        with pytest.raises(type(t_err)):
            fn(kiln, both(a)[0])


# Binary ops: the dtype-pair matrix (with broadcasting) against PyTorch.
BINARY = {
    "add": lambda T, x, y: T.add(x, y),
    "add_alpha": lambda T, x, y: T.add(x, y, alpha=2),
    "sub": lambda T, x, y: T.sub(x, y),
    "sub_alpha": lambda T, x, y: x.sub(y, alpha=3),
    "mul": lambda T, x, y: T.mul(x, y),
    "div": lambda T, x, y: T.div(x, y),
    "div_trunc": lambda T, x, y: T.div(x, y, rounding_mode="trunc"),
    "div_floor": lambda T, x, y: x.div(y, rounding_mode="floor"),
    "true_divide": lambda T, x, y: T.true_divide(x, y),
    "floor_divide": lambda T, x, y: T.floor_divide(x, y),
    "remainder": lambda T, x, y: T.remainder(x, y),
    "fmod": lambda T, x, y: T.fmod(x, y),
    "pow": lambda T, x, y: T.pow(x, y),
    "maximum": lambda T, x, y: T.maximum(x, y),
    "minimum": lambda T, x, y: x.minimum(y),
    "atan2": lambda T, x, y: T.atan2(x, y),
    "eq": lambda T, x, y: T.eq(x, y),
    "ne": lambda T, x, y: x.ne(y),
    "lt": lambda T, x, y: T.lt(x, y),
    "le": lambda T, x, y: T.le(x, y),
    "gt": lambda T, x, y: x.gt(y),
    "ge": lambda T, x, y: T.ge(x, y),
    "logical_and": lambda T, x, y: T.logical_and(x, y),
    "logical_or": lambda T, x, y: x.logical_or(y),
    "logical_xor": lambda T, x, y: T.logical_xor(x, y),
    "bitwise_and": lambda T, x, y: T.bitwise_and(x, y),
    "bitwise_or": lambda T, x, y: x.bitwise_or(y),
    "bitwise_xor": lambda T, x, y: T.bitwise_xor(x, y),
    "left_shift": lambda T, x, y: T.bitwise_left_shift(x, y),
    "right_shift": lambda T, x, y: x.bitwise_right_shift(y),
    "rsub": lambda T, x, y: T.rsub(x, y),
    "clamp_min_tensor": lambda T, x, y: T.clamp_min(x, y),
    "clamp_max_tensor": lambda T, x, y: x.clamp_max(y),
    "clip_tensor": lambda T, x, y: T.clip(x, min=y),
    "where": lambda T, x, y: T.where(x > 0 if x.dtype != T.bool else x, x, y),
    "where_method": lambda T, x, y: x.where(y > 1 if y.dtype != T.bool else y, y),
    "isclose": lambda T, x, y: T.isclose(x, y.to(x.dtype), rtol=0.1, atol=0.5),
}
DIVIDING = {"div_trunc", "div_floor", "floor_divide", "remainder", "fmod"}


# The full dtype-pair matrix for the ops whose promotion and dtype support differ most; the
# others (sharing those code paths) get every pair of a smaller set.
FULL_MATRIX = {"add", "sub", "mul", "div", "div_floor", "remainder", "pow", "maximum", "eq", "lt",
               "logical_and", "bitwise_and", "left_shift", "where", "clamp_min_tensor", "atan2"}
SOME_DTYPES = ["bool", "uint8", "int32", "float16", "bfloat16", "float64"]


@pytest.mark.parametrize("op", list(BINARY))
def test_binary_dtype_pairs(op):
    fn = BINARY[op]
    dtypes = ALL_DTYPES if op in FULL_MATRIX else SOME_DTYPES
    cases = []
    for da in dtypes:
        for db in dtypes:
            a = sample((2, 3), da, seed=4)
            b = sample((3,), db, seed=5)
            if op in DIVIDING:
                b = nonzero(b)
            cases.append((f"{da},{db}", lambda a=a, b=b, da=da, db=db: same(fn, (a, da), (b, db))))
    bad = failures(cases)
    assert not bad, bad


@pytest.mark.parametrize("op", [o for o in BINARY if o != "isclose"])
def test_binary_views_broadcast_empty_0d(op):
    fn = BINARY[op]
    a = sample((4, 6), "float32", seed=6)
    b = nonzero(sample((6, 4), "float32", seed=7))
    ka, ta = views(a, lambda v: v[:, ::2])
    kb, tb = views(b, lambda v: v.T[:, 1::2])
    compare(lambda: fn(kiln, ka, kb), lambda: fn(torch, ta, tb))
    ka, ta = views(a, lambda v: v.T)
    kb, tb = views(b, lambda v: v)
    # rsub and where put a contiguous operand first: PyTorch then allocates a contiguous result,
    # kiln's TensorIterator follows the first non-contiguous input (see the report).
    compare(lambda: fn(kiln, ka, kb), lambda: fn(torch, ta, tb),
            check_stride=op not in ("rsub", "where_method"))
    same(fn, np.zeros((0, 3), np.float32), np.ones((1, 3), np.float32))
    same(fn, np.zeros((2, 0), np.int64), np.zeros((2, 1), np.int64) + 1)
    same(fn, np.array(1.5, np.float32), np.array(-2.0, np.float32))
    # A 0-d tensor of a higher dtype does not promote a dimensioned one of the same category.
    same(fn, (sample((3,), "float16"), "float16"), np.array(2.0, np.float64))
    same(fn, sample((3,), "int8"), np.array(3, np.int64))
    same(fn, sample((3,), "int32"), np.array(2.5, np.float64))
    same(fn, np.array(3, np.int64), sample((2, 3), "float32"))
    same(fn, sample((2, 1, 3), "float64"), sample((4, 1), "float64"))


SCALARS = [True, 3, -2, 0, -0.5]


@pytest.mark.parametrize("op", [o for o in BINARY if o not in ("isclose", "where_method")])
def test_binary_python_numbers(op):
    """A Python number as the second operand: promotes as a number, or raises where PyTorch does."""
    fn = BINARY[op]
    cases = []
    for d in ALL_DTYPES:
        a = sample((2, 3), d, seed=8)
        for s in SCALARS:
            cases.append((f"{d},{s!r}", lambda a=a, d=d, s=s: compare(
                lambda: fn(kiln, both(a, d)[0], s), lambda: fn(torch, both(a, d)[1], s))))
    bad = failures(cases)
    assert not bad, bad


def test_number_first_functions():
    x = sample((2, 3), "int64", seed=10)
    f = sample((2, 3), "float32", seed=10)
    for s in (2, 2.5, True):
        for name in ("add", "sub", "mul", "div", "true_divide", "floor_divide", "remainder", "pow",
                     "bitwise_and", "bitwise_or", "bitwise_xor", "bitwise_left_shift",
                     "bitwise_right_shift"):
            for a in (nonzero(x), nonzero(f)):
                same(lambda T, t: getattr(T, name)(s, t), a)
    same(lambda T, t: T.div(7, t, rounding_mode="floor"), nonzero(x))
    same(lambda T, t: T.pow(1, t), f)
    same(lambda T, t: T.pow(1.0, t), x)
    same(lambda T, t: T.pow(True, t), np.array([True, False]))


# In-place binary forms: returning self, and the cast rules of in-place writes.
BINARY_INPLACE = ["add_", "sub_", "mul_", "div_", "true_divide_", "floor_divide_", "remainder_",
                  "fmod_", "pow_", "atan2_", "eq_", "ne_", "lt_", "le_", "gt_", "ge_",
                  "logical_and_", "logical_or_", "logical_xor_", "bitwise_and_", "bitwise_or_",
                  "bitwise_xor_", "bitwise_left_shift_", "bitwise_right_shift_", "clamp_min_",
                  "clamp_max_"]


@pytest.mark.parametrize("op", BINARY_INPLACE)
def test_binary_inplace(op):
    def run(T, x, y):
        r = getattr(x, op)(y)
        assert r is x
        return r

    dtypes = ALL_DTYPES if op in ("add_", "mul_", "div_", "eq_", "pow_") else SOME_DTYPES
    cases = []
    for da in dtypes:
        for db in dtypes:
            a = sample((2, 3), da, seed=11)
            b = sample((3,), db, seed=12)
            if op in ("floor_divide_", "remainder_", "fmod_"):
                b = nonzero(b)
            cases.append((f"{da},{db}", lambda a=a, b=b, da=da, db=db: same(run, (a, da), (b, db))))
        for s in (True, 2, -1.5):
            a = sample((2, 3), da, seed=13)
            cases.append((f"{da},{s!r}", lambda a=a, da=da, s=s: same(lambda T, x: run(T, x, s), (a, da))))
    bad = failures(cases)
    assert not bad, bad


def test_inplace_cast_and_shape_errors():
    i = kiln.from_numpy(np.array([1, 2, 3]))
    with pytest.raises(RuntimeError, match="result type Float can't be cast to the desired output type Long"):
        i.add_(1.5)
    with pytest.raises(RuntimeError, match="result type Float can't be cast to the desired output type Long"):
        i.add_(kiln.from_numpy(np.array([1.0, 2.0, 3.0], np.float32)))
    with pytest.raises(RuntimeError, match="result type Float can't be cast to the desired output type Long"):
        i.div_(2)
    with pytest.raises(RuntimeError, match="doesn't match the broadcast shape"):
        i.add_(kiln.from_numpy(np.ones((2, 3), np.int64)))
    with pytest.raises(RuntimeError, match="more than one element"):
        kiln.from_numpy(np.broadcast_to(np.arange(3.0), (2, 3))).add_(1)
    y = kiln.from_numpy(np.array([4, 7]))
    assert y.div_(2, rounding_mode="floor") is y
    assert y.numpy().tolist() == [2, 3]


def test_inplace_with_aliasing_input():
    """An input that views self in another layout reads the values from before the write."""
    a = np.arange(9, dtype=np.float32).reshape(3, 3)
    k = kiln.from_numpy(a.copy())
    k.add_(kiln.from_numpy(k.numpy().T))
    match(k, torch.from_numpy(a + a.T))
    k = kiln.from_numpy(a.copy())
    k.mul_(k)
    match(k, torch.from_numpy(a * a))


# Errors PyTorch raises for binary ops.
def test_binary_errors():
    i = kiln.from_numpy(np.array([5, -7]))
    b = kiln.from_numpy(np.array([True, False]))
    f = kiln.from_numpy(np.array([1.5, 2.0], np.float32))
    for fn in (lambda: i // 0, lambda: i % 0, lambda: kiln.fmod(i, 0),
               lambda: kiln.div(i, kiln.from_numpy(np.array([1, 0])), rounding_mode="trunc"),
               lambda: kiln.remainder(2, b), lambda: i.floor_divide_(0)):
        with pytest.raises(RuntimeError, match="ZeroDivisionError"):
            fn()
    with pytest.raises(RuntimeError, match="two bool tensors"):
        b - b
    with pytest.raises(RuntimeError, match="with a bool tensor is not supported"):
        i - b
    with pytest.raises(RuntimeError, match="with a bool tensor is not supported"):
        i - True
    with pytest.raises(RuntimeError, match="Boolean alpha only supported"):
        kiln.add(f, f, alpha=True)
    with pytest.raises(RuntimeError, match="alpha must not be a floating point number"):
        kiln.add(i, i, alpha=2.5)
    with pytest.raises(RuntimeError, match="rounding_mode"):
        kiln.div(i, i, rounding_mode="bad")
    with pytest.raises(RuntimeError, match="Integers to negative integer powers are not allowed"):
        i ** -1
    with pytest.raises(RuntimeError, match="without overflow"):
        kiln.pow(kiln.from_numpy(np.array([2], np.int8)), 200)
    for fn in (lambda: kiln.maximum(f, 2), lambda: kiln.minimum(f, 2.5), lambda: kiln.atan2(f, 1),
               lambda: kiln.logical_and(b, True), lambda: kiln.isclose(f, 1.0)):
        with pytest.raises(TypeError, match="must be Tensor"):
            fn()
    for fn in (lambda: kiln.bitwise_and(f, 1), lambda: f << 1, lambda: kiln.div(b, b, rounding_mode="floor"),
               lambda: kiln.pow(b, b), lambda: kiln.remainder(b, b)):
        with pytest.raises(NotImplementedError):
            fn()
    with pytest.raises(RuntimeError, match="must match the size"):
        f + kiln.from_numpy(np.ones(3, np.float32))


def test_regressions_of_the_first_arithmetic_kernels():
    # add with an integral alpha on bool tensors is allowed; bool alpha needs a bool result.
    same(lambda T, x: T.add(x, x, alpha=2), np.array([True, False]))
    same(lambda T, x: T.add(x, 1, alpha=True) if x.dtype == T.bool else x, np.array([True]))
    # INT_MIN / -1 and INT_MIN % -1 wrap instead of trapping (PyTorch itself traps for int32
    # and int64 division, so those are checked against the wrapped values).
    for d in INT_DTYPES[1:]:
        lo = np.iinfo(d).min
        a = np.array([lo, lo, 7], d)
        m = np.array([-1, 1, -1], d)
        same(lambda T, x: T.neg(x), a)
        same(lambda T, x: T.abs(x), a)
        if d in ("int8", "int16"):
            same(lambda T, x, y: T.div(x, y, rounding_mode="trunc"), a, m)
            same(lambda T, x, y: T.div(x, y, rounding_mode="floor"), a, m)
            same(lambda T, x, y: T.remainder(x, y), a, m)
            same(lambda T, x, y: T.fmod(x, y), a, m)
            continue
        k, km = kiln.from_numpy(a), kiln.from_numpy(m)
        assert kiln.div(k, km, rounding_mode="trunc").numpy().tolist() == [lo, lo, -7]
        assert kiln.div(k, km, rounding_mode="floor").numpy().tolist() == [lo, lo, -7]
        assert (k // km).numpy().tolist() == [lo, lo, -7]
        assert kiln.remainder(k, km).numpy().tolist() == [0, 0, 0]
        assert kiln.fmod(k, km).numpy().tolist() == [0, 0, 0]
    # Integer overflow wraps as in PyTorch.
    big = np.array([2**62, -(2**62), 2**31], np.int64)
    same(lambda T, x: x * 4, big)
    same(lambda T, x: x + x + x, big)
    same(lambda T, x: x ** 3, big)


def test_division_special_values():
    a = np.array([5.5, -7.0, 0.0, -0.0, np.inf, -np.inf, np.nan, -3.0, 3.0, -0.5], np.float64)
    b = np.array([0.0, 0.0, 0.0, 2.0, 2.0, -2.0, 1.0, np.inf, -np.inf, 2.0], np.float64)
    for d in FLOAT_DTYPES:
        for op in ("div", "div_trunc", "div_floor", "floor_divide", "remainder", "fmod", "pow",
                   "atan2", "maximum", "minimum"):
            same(BINARY[op], (a.astype(np.float32), d), (b.astype(np.float32), d))


def test_pow_scalar_exponents():
    a = np.array([0.0, -0.0, 1.5, -2.0, 3.0, np.inf, -np.inf, np.nan, 0.25], np.float64)
    for d in FLOAT_DTYPES:
        for e in (0, 1, 2, 3, -2, -1, 0.5, -0.5, 2.1, -1.7, True, False, 1e10):
            same(lambda T, x: T.pow(x, e), (a.astype(np.float32), d))
            same(lambda T, x: x.clone().pow_(e), (a.astype(np.float32), d))
    for d in INT_DTYPES + ["bool"]:
        for e in (0, 1, 2, 3, 5, True, False, 2.5):
            same(lambda T, x: x ** e, (sample((6,), d, seed=15), d))
    same(lambda T, x, y: T.pow(x, y), np.array([1, -1, 2, -2, 0]), np.array([-3, -3, -1, -2, -1]))


@pytest.mark.filterwarnings("ignore:where received a uint8 condition")
def test_where():
    c = np.array([[True, False, True], [False, True, False]])
    for d in ALL_DTYPES:
        for s in (True, 3, -2.5, 300, -1):
            x = sample((2, 3), d, seed=16)
            same(lambda T, c, x: T.where(c, x, s), c, (x, d))
            same(lambda T, c, x: T.where(c, s, x), c, (x, d))
    for s, o in ((1, 2), (1, 2.5), (True, 2), (True, False), (1.5, 2.5)):
        same(lambda T, c: T.where(c, s, o), c)
    same(lambda T, c, x, y: T.where(c, x, y), c[:, :1], np.arange(3.0), np.array(7, np.int64))
    same(lambda T, c, x: T.where(c, x, 1e300), c, np.ones((2, 3), np.float32))
    same(lambda T, x: T.where(x, x, x), np.array([1, 0]))
    same(lambda T, c: T.where(c.to(T.uint8), c, ~c), c)


def test_clamp():
    for d in ALL_DTYPES:
        x = sample((3, 4), d, seed=17)
        for lo, hi in ((0, 2), (-1.5, 1.5), (None, 1), (1, None), (True, None), (3, 1), (-1, None),
                       (None, None), (float("nan"), 1), (None, float("nan")), (2.5, None), (1000, None)):
            same(lambda T, x: T.clamp(x, lo, hi), (x, d))
            same(lambda T, x: x.clip(min=lo, max=hi), (x, d))
            same(lambda T, x: x.clone().clamp_(lo, hi), (x, d))
        same(lambda T, x: T.clamp_min(x, 1), (x, d))
        same(lambda T, x: T.clamp_max(x, -0.5), (x, d))
        same(lambda T, x: x.clone().clamp_min_(1), (x, d))
        same(lambda T, x: x.clone().clamp_max_(True), (x, d))
        for dm in ("float32", "int64", "int8", "bool"):
            lo = sample((4,), dm, seed=18)
            hi = sample((3, 1), dm, seed=19)
            hi = hi if dm == "bool" else hi + 2
            same(lambda T, x, lo, hi: T.clamp(x, lo, hi), (x, d), (lo, dm), (hi, dm))
            same(lambda T, x, lo: T.clamp(x, min=lo), (x, d), (lo, dm))
            same(lambda T, x, hi: x.clamp(max=hi), (x, d), (hi, dm))
            same(lambda T, x, lo: x.clone().clamp_(min=lo), (x, d), (lo, dm))
    nan = np.array([np.nan, 1.0, -1.0, 5.0], np.float32)
    same(lambda T, x, lo: T.clamp(x, lo), nan, np.array([0.0, np.nan, 0.0, 0.0], np.float32))
    same(lambda T, x, lo, hi: T.clamp(x, lo, hi), nan, np.zeros(4, np.float32),
         np.array([1.0, 1.0, np.nan, 2.0], np.float32))
    same(lambda T, x: T.clamp(x, min=T.zeros(()) if T is torch else T.zeros([])), nan)
    same(lambda T, x: T.clamp(x, min=T.abs(x), max=2.5), nan)
    same(lambda T, x: T.clip(x, 0, T.abs(x)), nan)
    same(lambda T, x: x.clamp_(T.abs(x), 1), nan)


def test_lerp():
    for d in FLOAT_DTYPES + ["int64"]:
        a = sample((2, 3), d, seed=20)
        b = sample((3,), d, seed=21)
        w = sample((2, 1), d, seed=22, low=-1, high=2)
        for weight in (0.0, 0.25, 0.5, 0.75, 1.0, 2.0, -1):
            same(lambda T, x, y: T.lerp(x, y, weight), (a, d), (b, d))
            same(lambda T, x, y: x.clone().lerp_(y, weight), (a, d), (b, d))
        same(lambda T, x, y, w: T.lerp(x, y, w), (a, d), (b, d), (w, d))
        same(lambda T, x, y, w: x.clone().lerp_(y, w), (a, d), (b, d), (w, d))
        same(lambda T, x, y, w: x.lerp(y, w), (a, d), (b, d), (w[0, 0], d))
    a32, a64 = sample((3,), "float32"), sample((3,), "float64")
    same(lambda T, x, y: T.lerp(x, y, 0.5), a32, a64)
    same(lambda T, x, y: T.lerp(x, y, y), a32, a64)
    same(lambda T, x: T.lerp(x, 2.0, 0.5), a32)
    same(lambda T, x: T.lerp(x, x, 1e300), a32)


@pytest.mark.parametrize("op", ["addcmul", "addcdiv"])
def test_addcmul_addcdiv(op):
    for d in FLOAT_DTYPES + ["int32", "uint8", "bool"]:
        a = sample((2, 3), d, seed=23)
        b = sample((3,), d, seed=24)
        c = nonzero(sample((2, 1), d, seed=25)) if d != "bool" else sample((2, 1), d, seed=25)
        for value in (1, 0.5, -3):
            same(lambda T, x, y, z: getattr(T, op)(x, y, z, value=value), (a, d), (b, d), (c, d))
            same(lambda T, x, y, z: getattr(x.clone(), op + "_")(y, z, value=value), (a, d), (b, d), (c, d))
    big = [sample((257,), "float32", seed=s) for s in (26, 27, 28)]
    big[2] = nonzero(big[2])
    same(lambda T, x, y, z: getattr(T, op)(x, y, z, value=0.37), *big)
    # Bit for bit in float32: addcmul's multiply-add is one FMA in PyTorch's kernel, as in kiln's.
    k = getattr(kiln, op)(*[kiln.from_numpy(a) for a in big], value=0.37)
    t = getattr(torch, op)(*[torch.from_numpy(a) for a in big], value=0.37)
    assert np.array_equal(k.numpy(), t.numpy())
    same(lambda T, x, y, z: getattr(x, op)(y.t(), z, value=0.1), sample((3, 3), "float32"),
         sample((3, 3), "float32", seed=1), nonzero(sample((3, 1), "float64", seed=2)))
    # Mixed dtypes promote (value takes no part); an int self cannot hold the float result.
    same(lambda T, x, y, z: getattr(T, op)(x, y, z, value=2), (a, "int64"), (b, "float16"), (c, "int32"))
    same(lambda T, x, y, z: getattr(x, op + "_")(y, z), (a, "int64"), (b, "float32"), (c, "float32"))
    same(lambda T, x, y, z: getattr(T, op)(x, y, z), sample((2, 3), "float32"), sample((4,), "float32"),
         sample((3,), "float32"))
    same(lambda T, x, y, z: getattr(x.clone()[:1].expand(2, 3), op + "_")(y, z),
         sample((2, 3), "float32"), sample((3,), "float32"), nonzero(sample((3,), "float32")))
    for fn in (lambda T: getattr(T, op)(T.ones(2), 2.0, T.ones(2)),
               lambda T: getattr(T.ones(2), op)(T.ones(2), 3)):
        compare(lambda: fn(kiln), lambda: fn(torch))


def test_addcdiv_integer_division_message():
    x = kiln.ones(2, dtype=kiln.int64)
    with pytest.raises(RuntimeError, match="Integer division with addcdiv is no longer supported"):
        kiln.addcdiv(x, x, x)
    with pytest.raises(RuntimeError, match="Integer division with addcdiv"):
        kiln.ones(2).addcdiv_(x, x)


def test_isclose_allclose_equal():
    a = np.array([1.0, 1.001, np.nan, np.inf, -np.inf, 0.0, 1e-9, 100.0], np.float64)
    b = np.array([1.0, 1.0, np.nan, np.inf, np.inf, 1e-9, 0.0, 100.5], np.float64)
    for d in FLOAT_DTYPES:
        for kw in ({}, {"equal_nan": True}, {"rtol": 0, "atol": 0}, {"rtol": 1e-2}, {"atol": 0.6},
                   {"rtol": 0, "atol": 1e-3}):
            same(lambda T, x, y: T.isclose(x, y, **kw), (a.astype(np.float32), d), (b.astype(np.float32), d))
            same(lambda T, x, y: x.isclose(y, **kw), (a.astype(np.float32), d), (b[:1].astype(np.float32), d))
            same(lambda T, x, y: T.allclose(x, y, **kw), (a.astype(np.float32), d), (b.astype(np.float32), d))
            same(lambda T, x, y: x.allclose(y, **kw), (a[:2].astype(np.float32), d), (b[:2].astype(np.float32), d))
    ints = np.array([16777217, 100, -100, 2**40, 3]), np.array([16777216, -100, 100, 2**40 + 3, 1])
    for d in INT_DTYPES + ["bool"]:
        for kw in ({}, {"rtol": 0, "atol": 0}, {"atol": 0.5}, {"rtol": 0.6, "atol": 0.5}, {"atol": 250}):
            same(lambda T, x, y: T.isclose(x, y, **kw), (ints[0].astype(d), d), (ints[1].astype(d), d))
    for fn in (lambda T, x, y: T.isclose(x, y), lambda T, x, y: T.allclose(x, y)):
        same(fn, np.ones(2, np.float32), np.ones(2, np.float64))
    same(lambda T, x: T.isclose(x, x, rtol=-1), np.ones(2))
    same(lambda T, x: T.isclose(x, x, atol=-1), np.ones(2))
    same(lambda T, x, y: T.allclose(x, y), np.ones(2), np.ones((3, 1)))
    for x, y in ((np.array([1.0, 2.0]), np.array([1.0, 2.0])), (np.array([1, 2]), np.array([1.0, 2.0])),
                 (np.array([True, False]), np.array([1, 0])), (np.array([np.nan]), np.array([np.nan])),
                 (np.array([1.0]), np.array(1.0)), (np.array([1.0, 2.0]), np.array([1.0, 2.5])),
                 (np.zeros((0, 2)), np.zeros((0, 2))), (np.zeros((2, 0)), np.zeros((0, 2)))):
        same(lambda T, x, y: T.equal(x, y), x, y)
        same(lambda T, x, y: x.equal(y), x, y)


def meta_compare(fn, *specs):
    """fn on kiln meta tensors of the given (shape, dtype) specs against fn on PyTorch CPU
    tensors: the same shape and dtype, or the same error; dtype-dispatch errors
    (NotImplementedError) come from CPU kernels only, as in PyTorch, so meta gives a result."""
    def run(T, device):
        return fn(T, *[T.ones(list(shape), dtype=getattr(T, d), device=device) for shape, d in specs])

    t_res, t_err = outcome(lambda: run(torch, "cpu"))
    k_res, k_err = outcome(lambda: run(kiln, "meta"))
    if isinstance(t_err, NotImplementedError):
        assert k_err is None and k_res.is_meta, f"kiln meta raised {k_err!r}"
        return
    if t_err is not None:
        assert k_err is not None and type(k_err) is type(t_err), f"torch {t_err!r}, kiln {k_err!r} / {k_res}"
        return
    assert k_err is None, f"kiln raised {k_err!r}"
    assert k_res.is_meta, "kiln result is not on the meta device"
    assert (tuple(k_res.shape), str(k_res.dtype).split(".")[-1]) == (tuple(t_res.shape), str(t_res.dtype).split(".")[-1])


@pytest.mark.parametrize("dtype", ["bool", "int32", "float16"])
def test_meta_matches_torch(dtype):
    """Meta results have the shapes and dtypes of PyTorch's results (PyTorch on CPU: its meta
    kernels take seconds to load and skip some CPU checks)."""
    cases = [(f"unary {op}", lambda op=op: meta_compare(UNARY[op], ((2, 3), dtype))) for op in UNARY]
    for op in BINARY:
        if op == "isclose":
            continue
        for other in ("int64", "float32") if dtype == "bool" else ("bool", "float64"):
            cases.append((f"{op} {other}", lambda op=op, other=other:
                          meta_compare(BINARY[op], ((2, 3), dtype), ((3,), other))))
    bad = failures(cases)
    assert not bad, bad


def test_meta_tensors():
    m = kiln.empty([2, 3], dtype=kiln.float16, device="meta")
    i = kiln.empty([3], dtype=kiln.int32, device="meta")
    cases = [(m.exp(), (2, 3), kiln.float16), (i.exp(), (3,), kiln.float32), (m + i, (2, 3), kiln.float16),
             (i / i, (3,), kiln.float32), (m > 1, (2, 3), kiln.bool), (kiln.where(m > 0, m, 1.5), (2, 3), kiln.float16),
             (m.clamp(0, 1), (2, 3), kiln.float16), (i.clamp(0.5), (3,), kiln.float32), (i // i, (3,), kiln.int32),
             (kiln.isclose(m, m), (2, 3), kiln.bool), (m.lerp(m, 0.5), (2, 3), kiln.float16),
             (i ** 2, (3,), kiln.int32), (m.add_(1), (2, 3), kiln.float16)]
    for r, shape, dtype in cases:
        assert r.is_meta and tuple(r.shape) == shape and r.dtype == dtype
    with pytest.raises(RuntimeError):
        kiln.allclose(m, m)


# Composites real code calls: kiln/_composites.py (count_nonzero ... heaviside), eager and
# compiled, against PyTorch; inputs with nan, inf, zeros and ties.
def _special(shape, seed):
    a = sample(shape, "float32", seed)
    a.flat[::7] = 0.0
    a.flat[3] = np.nan
    a.flat[5] = np.inf
    a.flat[6] = -np.inf
    return a


COMPOSITES = {
    "count_nonzero": lambda T, a, b, i: (T.count_nonzero(a), T.count_nonzero(i, dim=1), i.count_nonzero((0, 1))),
    "diff": lambda T, a, b, i: (T.diff(i), a.diff(n=2, dim=0), T.diff(i > 0, dim=0),
                                T.diff(b, prepend=b[:, :1], append=b[:, -2:], dim=1), T.diff(b[:, :1], n=3)),
    "aminmax": lambda T, a, b, i: (tuple(T.aminmax(b)), tuple(T.aminmax(i, dim=1, keepdim=True)),
                                   T.aminmax(b, dim=0).max, tuple(T.aminmax(b, keepdim=True))),
    "logaddexp": lambda T, a, b, i: (T.logaddexp(a, b), a.logaddexp(a), T.logaddexp(b * 100, b[:1] * 100)),
    "hypot": lambda T, a, b, i: (T.hypot(a, b), b.hypot(b[:1])),
    "xlogy": lambda T, a, b, i: (T.xlogy(a, b), T.xlogy(a.abs(), a), T.xlogy(2.0, b.abs()), T.xlogy(i, i),
                                 T.xlogy(i, 3.0)),
    "fmax_fmin": lambda T, a, b, i: (T.fmax(a, b), T.fmin(a, b), a.fmax(a.flip(0)), T.fmin(i, b)),
    "heaviside": lambda T, a, b, i: (T.heaviside(a, b), T.heaviside(i, T.tensor([7])), a.heaviside(T.tensor(0.5))),
}


@pytest.mark.parametrize("compiled", [False, True], ids=["eager", "compiled"])
@pytest.mark.parametrize("name", sorted(COMPOSITES))
def test_composites_match_pytorch(name, compiled):
    fn = COMPOSITES[name]
    a, b = _special((4, 5), 1), sample((4, 5), "float32", 2)
    i = sample((4, 5), "int64", 3)
    (ka, ta), (kb, tb), (ki, ti) = both(a), both(b), both(i)
    want = fn(torch, ta, tb, ti)
    if compiled:
        kiln.compiler.reset()
        got = kiln.compile(lambda a, b, i: fn(kiln, a, b, i))(ka, kb, ki)
    else:
        got = fn(kiln, ka, kb, ki)
    assert_match(got, want, rtol=1e-5, atol=1e-6)
    if name == "aminmax":  # a named tuple, also out of a compiled function
        f = kiln.compile(lambda x: kiln.aminmax(x, dim=0)) if compiled else (lambda x: kiln.aminmax(x, dim=0))
        r = f(kb)
        assert type(r).__name__ == "aminmax" and r.min is r[0]
        assert_match(r.max, torch.aminmax(tb, dim=0).max)


def test_composites_errors_match_pytorch():
    for call in (lambda T: T.diff(T.tensor(1.0)), lambda T: T.diff(T.ones(3), n=-1),
                 lambda T: T.logaddexp(T.ones(2, dtype=T.int64), T.ones(2, dtype=T.int64)),
                 lambda T: T.heaviside(T.ones(2), T.ones(2, dtype=T.float64)),
                 lambda T: T.aminmax(T.ones(0))):
        with pytest.raises(RuntimeError) as want:
            call(torch)
        with pytest.raises(RuntimeError):
            call(kiln)
        assert want.value is not None
