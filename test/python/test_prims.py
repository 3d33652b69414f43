"""The Prims IR (ir/ops/prims.yaml): each prim against PyTorch on valid inputs (equal shapes and
dtypes, explicit dims), its errors on mismatched shapes and dtypes, and the namespace plumbing
(graph targets `prims.*`, kiln.fx.prims, hidden from kiln.* and Tensor methods)."""
import numpy as np
import pytest

import kiln
import kiln.fx as fx
from oracle import ALL_DTYPES, FLOAT_DTYPES, INT_DTYPES, assert_match, both, need_torch, sample

P = fx.prims

UNARY_FLOAT = ["exp", "exp2", "expm1", "log", "log2", "log10", "log1p", "sqrt", "rsqrt", "sin", "cos", "tan",
               "asin", "acos", "atan", "sinh", "cosh", "tanh", "erf", "reciprocal"]
# Inputs inside each function's domain.
DOMAIN = {"log": (0.1, 4), "log2": (0.1, 4), "log10": (0.1, 4), "log1p": (-0.9, 4), "sqrt": (0.1, 4),
          "rsqrt": (0.1, 4), "asin": (-0.9, 0.9), "acos": (-0.9, 0.9), "reciprocal": (0.5, 4)}
UNARY_NUMERIC = ["abs", "neg", "sign", "floor", "ceil", "round", "trunc"]
NUMERIC_DTYPES = [d for d in ALL_DTYPES if d != "bool"]
SHAPES = [(3, 4), (), (0, 3), (2, 1, 3)]


def data(shape, dtype, seed=0, low=-4, high=4):
    return both(sample(shape, dtype, seed, low, high), dtype)


def noncontiguous(dtype, seed=0, low=-4, high=4):
    """A transposed view in both libraries (shape [4, 3], strides (1, 4))."""
    k, t = data((3, 4), dtype, seed, low, high)
    return k.t(), t.t()


# -- namespace -----------------------------------------------------------------------------


def test_prims_are_graph_targets_only():
    s = kiln._C._fx.op_schema("prims.broadcast_in_dim")
    assert s["namespace"] == "prims" and s["target"] == "prims.broadcast_in_dim"
    assert kiln._C._fx.op_schema("aten.add.Tensor")["namespace"] == "aten"
    assert "prims.convert_element_type" in kiln._C._fx.op_targets()
    # Hidden from kiln.* and Tensor methods; aten ops of the same name are untouched.
    assert not hasattr(kiln, "convert_element_type") and not hasattr(kiln, "broadcast_in_dim")
    assert not hasattr(kiln.ones(1), "broadcast_in_dim")
    assert kiln.add(kiln.ones(2), 1).tolist() == [2.0, 2.0]
    add = fx.resolve_target("prims.add")
    assert add is P.add.default and add is fx.resolve_target("prims.add.default")
    assert fx.qualified_name(add) == "prims.add" and repr(P.add) == "prims.add"
    assert repr(P) == "kiln.fx.prims"


def test_unknown_prim():
    with pytest.raises(ValueError, match="unknown op 'prims.nope'"):
        fx.resolve_target("prims.nope")
    with pytest.raises(ValueError, match="unknown op 'prims.add.Tensor'; overloads of add: prims.add"):
        fx.parse("graph @f(%x) {\n  %a = call_function prims.add.Tensor(%x, %x)\n  output %a\n}\n")


def test_graph_with_prims_prints_parses_and_runs():
    text = ("graph @f(%x: f32[2, 3], %y: f32[3]) {\n"
            "  %b = call_function prims.broadcast_in_dim(%y, [2, 3], [1])\n"
            "  %a = call_function prims.add(%x, %b)\n"
            "  %s = call_function prims.sum(%a, [1], output_dtype=f64)\n"
            "  output %s\n}\n")
    g = fx.parse(text)
    assert "call_function prims.add(%x, %b)" in str(g)
    assert fx.parse(str(g)).__str__() == str(g)
    gm = fx.GraphModule(kiln.nn.Module(), g)
    assert "prims.add(x, b)" in gm.code
    torch = need_torch()
    kx, tx = data((2, 3), "float32")
    ky, ty = data((3,), "float32", seed=1)
    assert_match(gm(kx, ky), (tx + ty).sum(1, dtype=torch.float64))
    # An aten graph still works next to it.
    g2 = fx.Graph()
    x = g2.placeholder("x")
    g2.output(g2.call_function("prims.neg", (g2.call_function("aten.exp", (x,)),)))
    assert_match(fx.GraphModule(kiln.nn.Module(), g2)(kx), -tx.exp())


# -- elementwise unary ---------------------------------------------------------------------


@pytest.mark.parametrize("name", UNARY_FLOAT)
@pytest.mark.parametrize("dtype", FLOAT_DTYPES)
def test_unary_float(name, dtype):
    torch = need_torch()
    low, high = DOMAIN.get(name, (-2, 2))
    fn = getattr(torch.special, "exp2") if name == "exp2" else getattr(torch, name)
    for shape in SHAPES:
        k, t = data(shape, dtype, low=low, high=high)
        assert_match(getattr(P, name)(k), fn(t))
    k, t = noncontiguous(dtype, low=low, high=high)
    assert_match(getattr(P, name)(k), fn(t))


@pytest.mark.parametrize("name", ["exp", "sqrt", "reciprocal", "erf"])
@pytest.mark.parametrize("dtype", ["int64", "int32", "bool"])
def test_unary_float_rejects_integers(name, dtype):
    k, _ = data((3,), dtype)
    with pytest.raises(RuntimeError, match=f"prims.{name}: expected a floating tensor"):
        getattr(P, name)(k)


@pytest.mark.parametrize("name", UNARY_NUMERIC)
@pytest.mark.parametrize("dtype", NUMERIC_DTYPES)
def test_unary_numeric(name, dtype):
    torch = need_torch()
    if name == "neg" and dtype == "uint8":
        pytest.skip("torch negates uint8 with wraparound; kiln too, compared below")
    for shape in SHAPES:
        k, t = data(shape, dtype)
        r = getattr(P, name)(k)
        assert_match(r, getattr(torch, name)(t))
        assert r.dtype == k.dtype
    k, t = noncontiguous(dtype)
    assert_match(getattr(P, name)(k), getattr(torch, name)(t))


@pytest.mark.parametrize("name", UNARY_NUMERIC)
def test_unary_numeric_rejects_bool(name):
    k, _ = data((3,), "bool")
    with pytest.raises(RuntimeError, match=f"prims.{name}: bool tensors are not supported"):
        getattr(P, name)(k)


@pytest.mark.parametrize("dtype", INT_DTYPES + ["bool"])
def test_bitwise_not(dtype):
    torch = need_torch()
    k, t = data((3, 4), dtype)
    assert_match(P.bitwise_not(k), torch.bitwise_not(t))
    with pytest.raises(RuntimeError, match="prims.bitwise_not: expected an integer or bool tensor"):
        P.bitwise_not(data((3,), "float32")[0])


@pytest.mark.parametrize("dtype", ALL_DTYPES)
def test_isfinite(dtype):
    torch = need_torch()
    a = sample((6,), dtype)
    if dtype in FLOAT_DTYPES:
        a[:3] = [np.inf, -np.inf, np.nan]
    k, t = both(a, dtype)
    assert_match(P.isfinite(k), torch.isfinite(t))


# -- elementwise binary --------------------------------------------------------------------

BINARY = {
    "add": ALL_DTYPES, "sub": NUMERIC_DTYPES, "mul": ALL_DTYPES, "div": NUMERIC_DTYPES,
    "remainder": NUMERIC_DTYPES, "fmod": NUMERIC_DTYPES, "pow": NUMERIC_DTYPES, "maximum": ALL_DTYPES,
    "minimum": ALL_DTYPES, "atan2": FLOAT_DTYPES, "bitwise_and": INT_DTYPES + ["bool"],
    "bitwise_or": INT_DTYPES + ["bool"], "bitwise_xor": INT_DTYPES + ["bool"],
    "eq": ALL_DTYPES, "ne": ALL_DTYPES, "lt": ALL_DTYPES, "le": ALL_DTYPES, "gt": ALL_DTYPES,
    "ge": ALL_DTYPES,
}


def torch_binary(torch, name, a, b):
    if name == "div" and not a.dtype.is_floating_point:
        return torch.div(a, b, rounding_mode="trunc")  # prims.div truncates integers
    return getattr(torch, name)(a, b)


def binary_inputs(name, dtype, shape, seed=0):
    a = sample(shape, dtype, seed)
    b = sample(shape, dtype, seed + 1)
    if name in ("div", "remainder", "fmod") and dtype != "bool":
        b = np.where(b == 0, 3, b).astype(b.dtype)  # no integer division by zero
    if name == "pow":
        if dtype in INT_DTYPES:
            b = np.abs(b) % 4
        else:
            a = np.abs(a) + 0.5
    return both(a, dtype), both(b, dtype)


@pytest.mark.parametrize("name", sorted(BINARY))
def test_binary(name):
    torch = need_torch()
    for dtype in BINARY[name]:
        for shape in SHAPES:
            (ka, ta), (kb, tb) = binary_inputs(name, dtype, shape)
            r = getattr(P, name)(ka, kb)
            assert_match(r, torch_binary(torch, name, ta, tb))
            assert r.dtype == (kiln.bool if name in ("eq", "ne", "lt", "le", "gt", "ge") else ka.dtype)
        (ka, ta), (kb, tb) = binary_inputs(name, dtype, (3, 4))
        assert_match(getattr(P, name)(ka.t(), kb.t()), torch_binary(torch, name, ta.t(), tb.t()))


@pytest.mark.parametrize("name", ["add", "mul", "eq", "maximum", "atan2", "bitwise_and", "div"])
def test_binary_rejects_broadcasting_and_promotion(name):
    dtype = "int32" if name == "bitwise_and" else "float32"
    a = data((2, 3), dtype)[0]
    with pytest.raises(RuntimeError, match=rf"prims.{name}: operands must have equal shapes \(prims do not broadcast\), got \[2, 3\] and \[3\]"):
        getattr(P, name)(a, data((3,), dtype)[0])
    with pytest.raises(RuntimeError, match=rf"prims.{name}: operands must have equal shapes"):
        getattr(P, name)(a, data((), dtype)[0])  # 0-d tensors are not broadcast either
    other = "int64" if dtype == "int32" else "float64"
    with pytest.raises(RuntimeError, match=rf"prims.{name}: operands must have equal dtypes \(prims do not promote\), got {dtype} and {other}"):
        getattr(P, name)(a, data((2, 3), other)[0])
    with pytest.raises(RuntimeError, match=rf"prims.{name}: operands must have equal shapes"):
        getattr(P, name)(a, 2)  # a number is a 0-d tensor, broadcast by no prim


def test_binary_dtype_restrictions():
    f, i, b = data((3,), "float32")[0], data((3,), "int32")[0], data((3,), "bool")[0]
    with pytest.raises(RuntimeError, match="prims.atan2: expected a floating tensor"):
        P.atan2(i, i)
    with pytest.raises(RuntimeError, match="prims.bitwise_or: expected an integer or bool tensor"):
        P.bitwise_or(f, f)
    for name in ("sub", "div", "remainder", "fmod", "pow"):
        with pytest.raises(RuntimeError, match=f"prims.{name}: bool tensors are not supported"):
            getattr(P, name)(b, b)


@pytest.mark.parametrize("dtype", ["float32", "float16", "int64", "bool"])
def test_where(dtype):
    torch = need_torch()
    kc, tc = data((3, 4), "bool", seed=5)
    (ka, ta), (kb, tb) = data((3, 4), dtype), data((3, 4), dtype, seed=1)
    assert_match(P.where(kc, ka, kb), torch.where(tc, ta, tb))
    assert_match(P.where(kc.t(), ka.t(), kb.t()), torch.where(tc.t(), ta.t(), tb.t()))
    with pytest.raises(RuntimeError, match="prims.where: pred must be a bool tensor, got int64"):
        P.where(data((3, 4), "int64")[0], ka, kb)
    with pytest.raises(RuntimeError, match="prims.where: operands must have equal shapes"):
        P.where(data((4,), "bool")[0], ka, kb)
    with pytest.raises(RuntimeError, match="prims.where: operands must have equal dtypes"):
        P.where(kc, ka, data((3, 4), "float64" if dtype != "float64" else "float32")[0])


# -- conversion ----------------------------------------------------------------------------


@pytest.mark.parametrize("src", ALL_DTYPES)
@pytest.mark.parametrize("dst", ["bool", "uint8", "int32", "int64", "float16", "bfloat16", "float32", "float64"])
def test_convert_element_type(src, dst):
    torch = need_torch()
    k, t = data((3, 4), src, low=0 if dst == "uint8" else -4)
    r = P.convert_element_type(k, getattr(kiln, dst))
    assert_match(r, t.to(getattr(torch, dst)))
    if src == dst:
        assert r.data_ptr() != k.data_ptr()  # always a new tensor


def test_clone_and_device_put():
    torch = need_torch()
    k, t = noncontiguous("float32")
    c = P.clone(k)
    assert_match(c, t.clone())
    assert c.data_ptr() != k.data_ptr()
    m = P.device_put(k, kiln.device("meta"))
    assert m.device == kiln.device("meta") and tuple(m.shape) == (4, 3)


# -- views and shapes ----------------------------------------------------------------------


def test_broadcast_in_dim():
    torch = need_torch()
    k, t = data((3,), "float32")
    r = P.broadcast_in_dim(k, [2, 3], [1])
    assert_match(r, t.expand(2, 3))
    assert r.stride() == (0, 1) and r.data_ptr() == k.data_ptr()
    k2, t2 = data((3, 1), "int64")
    assert_match(P.broadcast_in_dim(k2, [3, 2, 4], [0, 1]), t2[:, :, None].expand(3, 2, 4))
    assert_match(P.broadcast_in_dim(k2, [3, 1], [0, 1]), t2)
    k0, t0 = data((), "float64")
    assert_match(P.broadcast_in_dim(k0, [2, 0], []), t0.expand(2, 0))
    kn, tn = noncontiguous("float32")
    assert_match(P.broadcast_in_dim(kn, [2, 4, 3], [1, 2]), tn.expand(2, 4, 3))
    with pytest.raises(RuntimeError, match="prims.broadcast_in_dim: input dim 0 of size 3 cannot broadcast to size 4"):
        P.broadcast_in_dim(k, [4], [0])
    with pytest.raises(RuntimeError, match="must be increasing dims"):
        P.broadcast_in_dim(k2, [3, 3], [1, 0])
    with pytest.raises(RuntimeError, match="must name one output dim per input dim"):
        P.broadcast_in_dim(k2, [3, 2], [0])


def test_view_prims():
    torch = need_torch()
    k, t = data((2, 1, 3, 1), "float32")
    r = P.squeeze(k, [1, 3])
    assert_match(r, t.squeeze(3).squeeze(1))
    assert r.data_ptr() == k.data_ptr()
    with pytest.raises(RuntimeError, match="prims.squeeze: dim 2 of a tensor of shape \\[2, 1, 3, 1\\] has size 3, not 1"):
        P.squeeze(k, [2])
    with pytest.raises(IndexError, match="prims take non-negative dims"):
        P.squeeze(k, [-1])
    assert_match(P.transpose(k, [2, 0, 3, 1]), t.permute(2, 0, 3, 1))
    with pytest.raises(RuntimeError, match="must name every dim"):
        P.transpose(k, [0, 1])
    k2, t2 = data((5, 6), "int32")
    r = P.slice(k2, [1, 0], [5, 6], [2, 3])
    assert_match(r, t2[1:5:2, 0:6:3])
    assert_match(P.slice(k2, [2, 3], [2, 6]), t2[2:2, 3:6])
    assert_match(P.slice(k2.t(), [1, 1], [4, 3]), t2.t()[1:4, 1:3])
    with pytest.raises(RuntimeError, match="cannot be sliced"):
        P.slice(k2, [0, 4], [5, 2])
    assert_match(P.as_strided(k2, [2, 2], [1, 6], 1), torch.as_strided(t2, (2, 2), (1, 6), 1))
    v = P.view_of(k2)
    assert_match(v, t2)
    assert v.data_ptr() == k2.data_ptr()


def test_reshape_rev_cat():
    torch = need_torch()
    k, t = data((2, 3, 4), "float32")
    r = P.reshape(k, [6, 4])
    assert_match(r, t.reshape(6, 4))
    assert r.data_ptr() == k.data_ptr()  # a view when strides allow
    kn, tn = noncontiguous("float32")
    assert_match(P.reshape(kn, [12]), tn.reshape(12))  # a copy otherwise
    with pytest.raises(RuntimeError, match="prims.reshape: shape \\[5\\] is invalid for input of size 24"):
        P.reshape(k, [5])
    with pytest.raises(RuntimeError, match="sizes must be non-negative"):
        P.reshape(k, [-1, 4])
    assert_match(P.rev(k, [0, 2]), t.flip(0, 2))
    assert_match(P.rev(k, []), t)
    (ka, ta), (kb, tb) = data((2, 3), "int64"), data((2, 5), "int64", seed=1)
    assert_match(P.cat([ka, kb], 1), torch.cat([ta, tb], 1))
    assert_match(P.cat([ka, ka.t().t()], 0), torch.cat([ta, ta], 0))
    with pytest.raises(RuntimeError, match="prims.cat: tensors must have equal dtypes"):
        P.cat([ka, data((2, 5), "int32")[0]], 1)
    with pytest.raises(RuntimeError, match="prims.cat: sizes must match except in dim 1"):
        P.cat([ka, data((3, 5), "int64")[0]], 1)
    with pytest.raises(IndexError, match="non-negative dims"):
        P.cat([ka, kb], -1)


# -- reductions ----------------------------------------------------------------------------


@pytest.mark.parametrize("name", ["sum", "prod", "amax", "amin"])
@pytest.mark.parametrize("dtype", ["float32", "float64", "float16", "bfloat16", "int64", "int32"])
def test_reductions(name, dtype):
    torch = need_torch()
    k, t = data((3, 4, 5), dtype, low=-2, high=2)
    tdt = getattr(torch, dtype)

    def ref(x, dims):
        if name in ("amax", "amin"):
            return getattr(torch, name)(x, dims)
        if name == "sum":
            return torch.sum(x, dims, dtype=tdt)
        out = x
        for d in sorted(dims, reverse=True):
            out = torch.prod(out, d, dtype=tdt)
        return out

    fn = getattr(P, name)
    for dims in ([1], [0, 2], [0, 1, 2]):
        assert_match(fn(k, dims), ref(t, dims))
    assert_match(fn(k, None), ref(t, [0, 1, 2]))
    r = fn(k, [])  # reduces nothing (unlike aten.sum(dim=[]))
    assert_match(r, t)
    kn, tn = noncontiguous(dtype, low=-2, high=2)
    assert_match(fn(kn, [0]), ref(tn, [0]))
    if name == "sum":
        assert_match(fn(k, [1], output_dtype=kiln.float64), torch.sum(t, 1, dtype=torch.float64))
    with pytest.raises(IndexError, match="non-negative dims"):
        fn(k, [-1])
    with pytest.raises(RuntimeError, match="appears more than once"):
        fn(k, [1, 1])


@pytest.mark.parametrize("dtype", ["float32", "float64", "float16"])
def test_var(dtype):
    torch = need_torch()
    k, t = data((3, 4, 5), dtype)
    assert_match(P.var(k, [1]), torch.var(t, 1))
    assert_match(P.var(k, [0, 2], 0.0), torch.var(t, (0, 2), correction=0))
    assert_match(P.var(k, None, correction=2.0), torch.var(t, correction=2))
    assert_match(P.var(k, [1], output_dtype=kiln.float64), torch.var(t, 1).double())
    with pytest.raises(RuntimeError, match="prims.var: expected a floating tensor"):
        P.var(data((3,), "int64")[0], [0])


@pytest.mark.parametrize("name", ["argmax", "argmin"])
@pytest.mark.parametrize("dtype", ["float32", "int64", "float16"])
def test_arg_reductions(name, dtype):
    torch = need_torch()
    k, t = data((3, 4), dtype)
    assert_match(getattr(P, name)(k, 1), getattr(torch, name)(t, 1))
    assert_match(getattr(P, name)(k, None), getattr(torch, name)(t))
    assert_match(getattr(P, name)(k.t(), 0), getattr(torch, name)(t.t(), 0))


@pytest.mark.parametrize("dtype", ["float32", "float64", "int64"])
def test_mm_bmm(dtype):
    torch = need_torch()
    (ka, ta), (kb, tb) = data((3, 4), dtype), data((4, 5), dtype, seed=1)
    assert_match(P.mm(ka, kb), ta @ tb)
    assert_match(P.mm(kb.t(), ka.t()), tb.t() @ ta.t())
    (ka, ta), (kb, tb) = data((2, 3, 4), dtype), data((2, 4, 5), dtype, seed=1)
    assert_match(P.bmm(ka, kb), torch.bmm(ta, tb))
    with pytest.raises(RuntimeError, match="prims.mm: operands must have equal dtypes"):
        P.mm(data((3, 4), "float32")[0], data((4, 2), "float64")[0])
    with pytest.raises(RuntimeError, match="prims.bmm: expected 3-d tensors"):
        P.bmm(data((3, 4), dtype)[0], data((4, 2), dtype)[0])


# -- creation ------------------------------------------------------------------------------


def test_creation():
    torch = need_torch()
    cpu = kiln.device("cpu")
    assert_match(P.iota(5, start=2, step=3, dtype=kiln.int64, device=cpu), torch.arange(2, 17, 3))
    assert_match(P.iota(4, start=0, step=-2, dtype=kiln.int32, device=cpu), torch.arange(0, -8, -2, dtype=torch.int32))
    assert_match(P.iota(0, start=0, step=1, dtype=kiln.int64, device=cpu), torch.arange(0))
    with pytest.raises(RuntimeError, match="prims.iota: dtype must be an integer dtype"):
        P.iota(3, start=0, step=1, dtype=kiln.float32, device=cpu)
    with pytest.raises(RuntimeError, match="prims.iota: length must be non-negative"):
        P.iota(-1, start=0, step=1, dtype=kiln.int64, device=cpu)
    assert_match(P.full([2, 3], 1.5, dtype=kiln.float16, device=cpu), torch.full((2, 3), 1.5, dtype=torch.float16))
    assert_match(P.full([], True, dtype=kiln.bool, device=cpu), torch.tensor(True))
    e = P.empty_strided([2, 3], [1, 2], dtype=kiln.int32, device=cpu)
    assert e.shape == (2, 3) and e.stride() == (1, 2) and e.dtype == kiln.int32
    m = P.full([2], 0, dtype=kiln.float32, device=kiln.device("meta"))
    assert m.device == kiln.device("meta")


@pytest.mark.parametrize("order", [("aten.round", "aten.round.decimals"), ("aten.round.decimals", "aten.round")])
def test_generated_code_calls_default_and_named_overloads(order):
    # Regression: code calling both aten.round and aten.round.decimals (in either order) bound
    # one over the other.
    torch = need_torch()
    g = fx.Graph()
    x = g.placeholder("x")
    outs = [g.call_function(t, (x,), {"decimals": 1} if t.endswith("decimals") else None) for t in order]
    g.output(tuple(outs))
    k, t = data((5,), "float32")
    expected = [torch.round(t, decimals=1) if n.endswith("decimals") else torch.round(t) for n in order]
    assert_match(fx.GraphModule(kiln.nn.Module(), g)(k), tuple(expected))
