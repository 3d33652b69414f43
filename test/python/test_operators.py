"""Python operators on kiln.Tensor against PyTorch: unary, binary with tensors and numbers on
either side, reflected and in-place forms, comparisons with non-tensor operands."""
import numpy as np
import pytest

import kiln
from oracle import ALL_DTYPES, both, need_torch, sample

torch = need_torch()
from test_pointwise import SCALARS, compare, failures, match, nonzero, outcome, same, views  # noqa: E402

UNARY_OPERATORS = {
    "neg": lambda x: -x,
    "pos": lambda x: +x,
    "abs": lambda x: abs(x),
    "invert": lambda x: ~x,
}


@pytest.mark.parametrize("op", list(UNARY_OPERATORS))
def test_unary_operators(op):
    fn = UNARY_OPERATORS[op]
    bad = failures((d, lambda d=d: same(lambda T, x: fn(x), (sample((3, 4), d, seed=1), d)))
                   for d in ALL_DTYPES)
    assert not bad, bad
    k, t = views(sample((4, 6), "int32"), lambda v: v.T[::2])
    compare(lambda: fn(k), lambda: fn(t))


def test_invert_of_float_is_a_type_error():
    k, t = both(np.array([1.5], np.float32))
    with pytest.raises(TypeError, match="only implemented on integer and Boolean-type tensors"):
        ~t
    with pytest.raises(TypeError, match="only implemented on integer and Boolean-type tensors"):
        ~k


BINARY_OPERATORS = {
    "add": lambda x, y: x + y,
    "sub": lambda x, y: x - y,
    "mul": lambda x, y: x * y,
    "truediv": lambda x, y: x / y,
    "floordiv": lambda x, y: x // y,
    "mod": lambda x, y: x % y,
    "pow": lambda x, y: x ** y,
    "and": lambda x, y: x & y,
    "or": lambda x, y: x | y,
    "xor": lambda x, y: x ^ y,
    "lshift": lambda x, y: x << y,
    "rshift": lambda x, y: x >> y,
    "eq": lambda x, y: x == y,
    "ne": lambda x, y: x != y,
    "lt": lambda x, y: x < y,
    "le": lambda x, y: x <= y,
    "gt": lambda x, y: x > y,
    "ge": lambda x, y: x >= y,
}


@pytest.mark.parametrize("op", list(BINARY_OPERATORS))
def test_binary_operators_tensor_tensor(op):
    fn = BINARY_OPERATORS[op]
    cases = []
    for da in ("bool", "uint8", "int32", "int64", "float16", "bfloat16", "float32", "float64"):
        for db in ("bool", "int8", "int64", "float32", "float64"):
            a = sample((2, 3), da, seed=2)
            b = nonzero(sample((3,), db, seed=3)) if op in ("floordiv", "mod") else sample((3,), db, seed=3)
            cases.append((f"{da},{db}", lambda a=a, b=b, da=da, db=db: same(lambda T, x, y: fn(x, y), (a, da), (b, db))))
    bad = failures(cases)
    assert not bad, bad
    a, b = sample((4, 6), "float32", seed=4), nonzero(sample((6, 4), "float32", seed=5))
    ka, ta = views(a, lambda v: v[:, ::2])
    kb, tb = views(b, lambda v: v.T[:, 1::2])
    compare(lambda: fn(ka, kb), lambda: fn(ta, tb))
    same(lambda T, x, y: fn(x, y), np.zeros((0, 3), np.float32), np.ones((2, 1, 3), np.float32))
    same(lambda T, x, y: fn(x, y), np.array(3, np.int64), np.array(2.5))


@pytest.mark.parametrize("op", list(BINARY_OPERATORS))
def test_binary_operators_with_numbers(op):
    fn = BINARY_OPERATORS[op]
    cases = []
    for d in ALL_DTYPES:
        a = sample((2, 3), d, seed=8)
        for s in SCALARS + [2.5, False]:
            cases.append((f"{d},{s!r}", lambda a=a, d=d, s=s: compare(
                lambda: fn(both(a, d)[0], s), lambda: fn(both(a, d)[1], s))))
    bad = failures(cases)
    assert not bad, bad


REFLECTED = {
    "radd": lambda s, x: s + x,
    "rsub": lambda s, x: s - x,
    "rmul": lambda s, x: s * x,
    "rtruediv": lambda s, x: s / x,
    "rfloordiv": lambda s, x: s // x,
    "rmod": lambda s, x: s % x,
    "rpow": lambda s, x: s ** x,
    "rand": lambda s, x: s & x,
    "ror": lambda s, x: s | x,
    "rxor": lambda s, x: s ^ x,
    "rlshift": lambda s, x: s << x,
    "rrshift": lambda s, x: s >> x,
    "req": lambda s, x: s == x,
    "rlt": lambda s, x: s < x,
    "rge": lambda s, x: s >= x,
}


@pytest.mark.parametrize("op", list(REFLECTED))
def test_reflected_operators(op):
    fn = REFLECTED[op]
    cases = []
    for d in ALL_DTYPES:
        a = sample((2, 3), d, seed=9)
        if op in ("rfloordiv", "rmod"):
            a = nonzero(a)
        for s in SCALARS:
            cases.append((f"{d},{s!r}", lambda a=a, d=d, s=s: compare(
                lambda: fn(s, both(a, d)[0]), lambda: fn(s, both(a, d)[1]))))
    bad = failures(cases)
    assert not bad, bad


INPLACE_OPERATORS = {
    "iadd": lambda x, y: x.__iadd__(y),
    "isub": lambda x, y: x.__isub__(y),
    "imul": lambda x, y: x.__imul__(y),
    "itruediv": lambda x, y: x.__itruediv__(y),
    "ifloordiv": lambda x, y: x.__ifloordiv__(y),
    "imod": lambda x, y: x.__imod__(y),
    "ipow": lambda x, y: x.__ipow__(y),
    "iand": lambda x, y: x.__iand__(y),
    "ior": lambda x, y: x.__ior__(y),
    "ixor": lambda x, y: x.__ixor__(y),
    "ilshift": lambda x, y: x.__ilshift__(y),
    "irshift": lambda x, y: x.__irshift__(y),
}


@pytest.mark.parametrize("op", list(INPLACE_OPERATORS))
def test_inplace_operators(op):
    fn = INPLACE_OPERATORS[op]
    cases = []
    for d in ALL_DTYPES:
        for s in (True, 3, 2.5):
            def check(d=d, s=s):
                a = sample((2, 3), d, seed=14)
                k, t = both(a, d)
                compare(lambda: fn(k, s), lambda: fn(t, s))
                if outcome(lambda: fn(both(a, d)[1], s))[1] is None:
                    assert fn(k, s) is k
            cases.append((f"{d},{s!r}", check))
    bad = failures(cases)
    assert not bad, bad


def test_inplace_statement_keeps_identity():
    k = kiln.from_numpy(np.arange(6, dtype=np.float32))
    before = k
    k += 1
    k *= 2
    k -= 0.5
    k /= 4
    k **= 2
    assert k is before
    t = torch.arange(6, dtype=torch.float32)
    t += 1
    t *= 2
    t -= 0.5
    t /= 4
    t **= 2
    match(k, t)


def test_eq_with_non_tensor_operands():
    k, t = both(np.array([1, 2]))
    for other in (None, "a", object()):
        assert (k == other) == (t == other)
        assert (k != other) == (t != other)
    for fn in (lambda x: x < None, lambda x: x >= "a"):
        with pytest.raises(TypeError):
            fn(t)
        with pytest.raises(TypeError):
            fn(k)


def test_operators_are_the_ops():
    assert kiln.Tensor.__add__ is kiln.Tensor.add
    assert kiln.Tensor.__mul__ is kiln.Tensor.mul
    assert kiln.Tensor.__iadd__ is kiln.Tensor.add_
