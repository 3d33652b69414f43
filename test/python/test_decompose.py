"""kiln.fx.retrace (the make_fx analogue) at the aten / core_aten / prims levels, and the
aot_eager backend: decomposed graphs compute what the eager ops compute."""
import re

import numpy as np
import pytest

import kiln
import kiln.fx as fx
from kiln.compiler.backends import list_backends, lookup_backend
from oracle import assert_match, both, need_torch

GRAPH = """graph @f(%x: f32[2, 4, 8], %w: f32[3, 8], %b: f32[3], %g: f32[3]) {
  %l = call_function aten.linear(%x, %w, %b)
  %n = call_function aten.layer_norm(%l, [3], %g)
  %e = call_function aten.gelu(%n)
  %s = call_function aten.softmax.int(%e, -1)
  %ls = call_function aten.log_softmax.int(%e, 1)
  %v = call_function aten.var.dim(%e, [1])
  %lse = call_function aten.logsumexp(%e, [2])
  output (%s, %ls, %v, %lse)
}"""


def _inputs(seed=0):
    rng = np.random.default_rng(seed)
    return [rng.standard_normal(s).astype(np.float32) for s in ((2, 4, 8), (3, 8), (3,), (3,))]


def _ops(graph):
    return [n.target for n in graph.nodes if n.op == "call_function"]


def _tags(target):
    """The op table tags of an `aten.<name>.<overload>` target."""
    table = {e["schema"].split("(")[0]: set(e["tags"]) for e in kiln._C._op_table()}
    return table[target.split(".", 1)[1]]


def _run(graph, arrays):
    gm = fx.GraphModule({}, graph)
    return gm(*[kiln.from_numpy(a) for a in arrays])


@pytest.mark.parametrize("level", ["aten", "core_aten", "prims"])
def test_retrace_graph_matches_eager(level):
    g = fx.parse(GRAPH)
    r = fx.retrace(g, level)
    assert isinstance(r, fx.Graph) and r is not g
    r.lint(require_types=True)
    arrays = _inputs()
    want = _run(g, arrays)
    got = _run(r, arrays)
    for a, b in zip(got, want):
        np.testing.assert_allclose(a.numpy(), b.numpy(), rtol=1e-5, atol=1e-5)
        assert a.dtype == b.dtype and a.shape == b.shape


def test_retrace_levels():
    g = fx.parse(GRAPH)
    assert _ops(fx.retrace(g, "aten")) == _ops(g)
    core = fx.retrace(g, "core_aten")
    targets = _ops(core)
    # var.dim is core ATen in PyTorch 2.13, so it stays at this level.
    for gone in ("aten.linear", "aten.layer_norm", "aten.softmax.int", "aten.log_softmax.int",
                 "aten.logsumexp", "aten.t"):
        assert gone not in targets
    for t in targets:
        assert "core" in _tags(t), t
    prims = fx.retrace(g, "prims")
    for t in _ops(prims):
        assert t.startswith("prims."), t


def test_retrace_graph_module_keeps_attributes():
    g = fx.parse("""graph @m(%x: f32[4, 8]) {
  %w = get_attr weight : f32[3, 8]
  %l = call_function aten.linear(%x, %w)
  output (%l,)
}""")
    weight = kiln.from_numpy(np.ones((3, 8), np.float32))
    gm = fx.GraphModule({"weight": weight}, g)
    r = fx.retrace(gm, "core_aten")
    assert isinstance(r, fx.GraphModule)
    assert r.weight is weight
    assert "aten.linear" not in _ops(r.graph)
    x = kiln.from_numpy(np.arange(32, dtype=np.float32).reshape(4, 8))
    np.testing.assert_allclose(r(x)[0].numpy(), gm(x)[0].numpy())


def test_retrace_in_place_mutates_the_input():
    g = fx.parse("""graph @f(%x: f32[3]) {
  %a = call_function aten.mul_.Scalar(%x, 2)
  %r = call_function aten.rsub.Scalar(%a, 1)
  output (%r,)
}""")
    r = fx.retrace(g, "core_aten")
    assert _ops(r) == ["aten.mul.Scalar", "aten.copy_", "aten.scalar_tensor", "aten.sub.Tensor"]
    x = kiln.from_numpy(np.array([1.0, 2.0, 3.0], np.float32))
    (out,) = fx.GraphModule({}, r)(x)
    np.testing.assert_allclose(x.numpy(), [2.0, 4.0, 6.0])
    np.testing.assert_allclose(out.numpy(), [-1.0, -3.0, -5.0])


def test_scalar_first_operands_promote_like_python_numbers():
    g = fx.parse("""graph @f(%i: i32[3], %h: f16[3]) {
  %a = call_function aten.sub.Scalar_Tensor(2.5, %i)
  %b = call_function aten.mul.Scalar_Tensor(3, %h)
  %c = call_function aten.floor_divide.Scalar_Tensor(7, %i)
  output (%a, %b, %c)
}""")
    r = fx.retrace(g, "core_aten")
    i = kiln.from_numpy(np.array([1, 2, 3], np.int32))
    h = kiln.from_numpy(np.array([0.5, 1.5, 2.5], np.float16))
    want = fx.GraphModule({}, g)(i, h)
    got = fx.GraphModule({}, r)(i, h)
    for a, b in zip(got, want):
        assert a.dtype == b.dtype
        np.testing.assert_allclose(a.numpy(), b.numpy())


def test_retrace_errors():
    g = fx.parse(GRAPH)
    with pytest.raises(ValueError, match="unknown level"):
        fx.retrace(g, "core")
    with pytest.raises(TypeError):
        fx.retrace("graph", "aten")
    untyped = fx.parse("graph @f(%x) {\n  %r = call_function aten.relu(%x)\n  output (%r,)\n}")
    with pytest.raises(RuntimeError, match="type"):
        fx.retrace(untyped, "aten")
    bad = fx.parse("""graph @f(%x: i64[3]) {
  %s = call_function aten.softmax.int(%x, 0)
  output (%s,)
}""")
    with pytest.raises(NotImplementedError):
        fx.retrace(bad, "core_aten")


def test_decompose_passes_are_registered():
    names = [name for name, _ in fx.passes.available()]
    assert "decompose-core-aten" in names and "decompose-prims" in names
    g = fx.parse(GRAPH)
    fx.passes.run(g, "decompose-core-aten")
    assert "aten.softmax.int" not in _ops(g)


def test_aot_eager_backend_runs_the_decomposed_graph():
    assert "aot_eager" in list_backends()
    g = fx.parse(GRAPH)
    gm = fx.GraphModule({}, g)
    arrays = _inputs(1)
    inputs = [kiln.from_numpy(a) for a in arrays]
    fn = lookup_backend("aot_eager")(gm, inputs)
    assert "aten.softmax.int" not in _ops(fn.__self__.graph)
    for a, b in zip(fn(*inputs), gm(*inputs)):
        np.testing.assert_allclose(a.numpy(), b.numpy(), rtol=1e-5, atol=1e-5)


def test_compile_with_aot_eager_matches_torch():
    torch = need_torch()
    k_model = kiln.nn.Sequential(kiln.nn.Linear(8, 6), kiln.nn.GELU(), kiln.nn.LayerNorm(6))
    t_model = torch.nn.Sequential(torch.nn.Linear(8, 6), torch.nn.GELU(), torch.nn.LayerNorm(6))
    with torch.no_grad():
        for kp, tp in zip(k_model.parameters(), t_model.parameters()):
            tp.copy_(torch.from_numpy(kp.detach().numpy()))
    k, t = both(np.random.default_rng(2).standard_normal((5, 8)).astype(np.float32))

    def f(model, x):
        return model(x).softmax(-1).sum(0)

    compiled = kiln.compile(lambda x: f(k_model, x), backend="aot_eager")
    with torch.no_grad():
        want = f(t_model, t)
    assert_match(compiled(k), want)


# One call of each op with a core ATen decomposition: (target, arguments, input declarations).
CASES = [
 ("aten.add.Scalar_Tensor", "2.5, %i", "%i: i32[3]"),
 ("aten.sub.Scalar_Tensor", "2, %x", "%x: f32[3]"),
 ("aten.div.Scalar_Tensor", "3, %i, rounding_mode=\"trunc\"", "%i: i32[3]"),
 ("aten.rsub.Tensor", "%x, %y, alpha=2", "%x: f32[3], %y: f32[2, 3]"),
 ("aten.rsub.Scalar", "%i, 1.5", "%i: i32[3]"),
 ("aten.negative", "%x", "%x: f32[3]"),
 ("aten.positive", "%x", "%x: f32[3]"),
 ("aten.round.decimals", "%x, decimals=2", "%x: f32[3]"),
 ("aten.square", "%b", "%b: b8[3]"),
 ("aten.square", "%i", "%i: i32[3]"),
 ("aten.nan_to_num", "%n", "%n: f32[4]"),
 ("aten.nan_to_num", "%n, 1.0, 2.0, -2.0", "%n: f32[4]"),
 ("aten.nan_to_num", "%h", "%h: f16[4]"),
 ("aten.silu", "%x", "%x: f32[3]"),
 ("aten.isfinite", "%n", "%n: f32[4]"),
 ("aten.isfinite", "%i", "%i: i32[3]"),
 ("aten.true_divide.Tensor", "%i, %i", "%i: i32[3]"),
 ("aten.floor_divide", "%x, %y", "%x: f32[3], %y: f32[2, 3]"),
 ("aten.floor_divide.Scalar", "%i, 2", "%i: i32[3]"),
 ("aten.remainder.Scalar_Tensor", "5, %i", "%i: i32[3]"),
 ("aten.bitwise_and.Scalar_Tensor", "6, %i", "%i: i32[3]"),
 ("aten.clip", "%x, -0.5, 0.5", "%x: f32[3]"),
 ("aten.clamp_min", "%x, 0.1", "%x: f32[3]"),
 ("aten.clamp_max.Tensor", "%x, %y", "%x: f32[3], %y: f32[2, 3]"),
 ("aten.lerp.Scalar", "%x, %y, 0.3", "%x: f32[3], %y: f32[2, 3]"),
 ("aten.lerp.Scalar", "%x, %y, 0.7", "%x: f32[3], %y: f32[2, 3]"),
 ("aten.lerp.Tensor", "%x, %y, %x", "%x: f32[3], %y: f32[2, 3]"),
 ("aten.isclose", "%x, %y", "%x: f32[3], %y: f32[2, 3]"),
 ("aten.isclose", "%i, %i", "%i: i32[3]"),
 ("aten.exp2", "%i", "%i: i32[3]"),
 ("aten.exp2", "%h", "%h: f16[4]"),
 ("aten.sum", "%i", "%i: i32[3]"),
 ("aten.max", "%x", "%x: f32[3]"),
 ("aten.min", "%i", "%i: i32[3]"),
 ("aten.all", "%x", "%x: f32[3]"),
 ("aten.all.dim", "%y, 1", "%y: f32[2, 3]"),
 ("aten.all.dims", "%y, [0], True", "%y: f32[2, 3]"),
 ("aten.std.correction", "%y, [1]", "%y: f32[2, 3]"),
 ("aten.var_mean.correction", "%y, [1], correction=0", "%y: f32[2, 3]"),
 ("aten.std_mean.correction", "%y", "%y: f32[2, 3]"),
 ("aten.linalg_vector_norm", "%y", "%y: f32[2, 3]"),
 ("aten.linalg_vector_norm", "%y, 1, [1]", "%y: f32[2, 3]"),
 ("aten.linalg_vector_norm", "%y, inf", "%y: f32[2, 3]"),
 ("aten.linalg_vector_norm", "%y, -inf, [0], True", "%y: f32[2, 3]"),
 ("aten.linalg_vector_norm", "%y, 0", "%y: f32[2, 3]"),
 ("aten.linalg_vector_norm", "%y, 3.5", "%y: f32[2, 3]"),
 ("aten.linalg_vector_norm", "%h, 2, dtype=f32", "%h: f16[4]"),
 ("aten.logsumexp", "%y, [0, 1], True", "%y: f32[2, 3]"),
 ("aten.logsumexp", "%i, [0]", "%i: i32[3]"),
 ("aten.logsumexp", "%n, [0]", "%n: f32[4]"),
 ("aten.softmax.int", "%y, 0, f64", "%y: f32[2, 3]"),
 ("aten.softmax.int", "%s, 0", "%s: f32[]"),
 ("aten.log_softmax.int", "%e, 1", "%e: f32[0, 3]"),
 ("aten.layer_norm", "%y, [2, 3]", "%y: f32[2, 3]"),
 ("aten.layer_norm", "%hh, [3], %w, %w", "%hh: f16[2, 3], %w: f32[3]"),
 ("aten.zeros", "[2, 3]", ""),
 ("aten.ones", "[2], dtype=i64", ""),
 ("aten.zeros_like", "%i", "%i: i32[3]"),
 ("aten.ones_like", "%x, dtype=f64", "%x: f32[3]"),
 ("aten.new_zeros", "%i, [2]", "%i: i32[3]"),
 ("aten.new_ones", "%x, [2], dtype=b8", "%x: f32[3]"),
 ("aten.new_full", "%x, [2], 7", "%x: f32[3]"),
 ("aten.arange", "5", ""),
 ("aten.arange", "5.5", ""),
 ("aten.arange.start", "2, 7.0", ""),
 ("aten.eye", "3", ""),
 ("aten.eye.m", "2, 4, dtype=i32", ""),
 ("aten.transpose.int", "%y, 0, -1", "%y: f32[2, 3]"),
 ("aten.t", "%y", "%y: f32[2, 3]"),
 ("aten.t", "%x", "%x: f32[3]"),
 ("aten.squeeze", "%u", "%u: f32[1, 3, 1]"),
 ("aten.detach", "%x", "%x: f32[3]"),
 ("aten.masked_fill.Scalar", "%y, %m, 2", "%y: f32[2, 3], %m: b8[3]"),
 ("aten.masked_fill.Tensor", "%y, %m, %s", "%y: f32[2, 3], %m: b8[3], %s: f64[]"),
 ("aten.tril", "%y", "%y: f32[2, 3]"),
 ("aten.triu", "%z, 1", "%z: f32[2, 3, 4]"),
 ("aten.tril", "%z, -1", "%z: f32[2, 3, 4]"),
 ("aten.roll", "%y, [1]", "%y: f32[2, 3]"),
 ("aten.roll", "%y, [1, -4], [0, 1]", "%y: f32[2, 3]"),
 ("aten.roll", "%e, [1], [1]", "%e: f32[0, 3]"),
 ("aten.baddbmm", "%z1, %z2, %z3, beta=0.5, alpha=2", "%z1: f32[3, 4], %z2: f32[2, 3, 5], %z3: f32[2, 5, 4]"),
 ("aten.baddbmm", "%z1, %z2, %z3, beta=0", "%z1: f32[3, 4], %z2: f32[2, 3, 5], %z3: f32[2, 5, 4]"),
 ("aten.mv", "%y, %x", "%y: f32[2, 3], %x: f32[3]"),
 ("aten.addmv", "%v, %y, %x, beta=2", "%v: f32[2], %y: f32[2, 3], %x: f32[3]"),
 ("aten.dot", "%i, %i", "%i: i32[3]"),
 ("aten.outer", "%x, %v", "%x: f32[3], %v: f32[2]"),
 ("aten.ger", "%x, %v", "%x: f32[3], %v: f32[2]"),
 ("aten.matmul", "%x, %x", "%x: f32[3]"),
 ("aten.matmul", "%x, %m3", "%x: f32[3], %m3: f32[3, 4]"),
 ("aten.matmul", "%z2, %x5", "%z2: f32[2, 3, 5], %x5: f32[5]"),
 ("aten.matmul", "%z2, %m5", "%z2: f32[2, 3, 5], %m5: f32[5, 4]"),
 ("aten.matmul", "%x5, %z2t", "%x5: f32[5], %z2t: f32[2, 5, 3]"),
 ("aten.matmul", "%a4, %b3", "%a4: f32[2, 1, 3, 5], %b3: f32[4, 5, 2]"),
 ("aten.matmul", "%m3t, %z3", "%m3t: f32[3, 5], %z3: f32[2, 5, 4]"),
 ("aten.add_.Tensor", "%x, %x", "%x: f32[3]"),
 ("aten.fill_.Scalar", "%x, 3", "%x: f32[3]"),
 ("aten.floor_divide_.Tensor", "%x, %x", "%x: f32[3]"),
 ("aten.pow_.Tensor", "%x, %x", "%x: f32[3]"),
 ("aten.index_put_", "%x, [%idx], %v", "%x: f32[3], %idx: i64[2], %v: f32[2]"),
]


def _input(decl, rng):
    name, t = decl.split(": ")
    dt, shape = t.split("[")
    shape = [int(s) for s in shape[:-1].split(",") if s.strip()]
    np_dt = {"f32": np.float32, "f16": np.float16, "f64": np.float64, "i32": np.int32,
             "i64": np.int64, "b8": np.bool_}[dt]
    if name == "%n":
        a = np.array([np.nan, np.inf, -np.inf, 1.5], np.float32)
    elif name == "%idx":
        a = np.array([0, 2], np.int64)
    elif dt == "b8":
        a = rng.random(shape) > 0.5
    elif dt in ("i32", "i64"):
        a = rng.integers(1, 5, shape).astype(np_dt)
    else:
        a = (rng.standard_normal(shape) + 0.1).astype(np_dt)
    return np.array(a)


@pytest.mark.parametrize("target,args,decls", CASES, ids=[f"{c[0]}({c[1]})" for c in CASES])
def test_decomposition_matches_eager(target, args, decls):
    g = fx.parse(f"graph @f({decls}) {{\n  %r = call_function {target}({args})\n  output (%r,)\n}}")
    r = fx.retrace(g, "core_aten")
    targets = _ops(r)
    assert target not in targets
    for t in targets:  # copy_ writes an in-place op's result into its input
        assert t == "aten.copy_" or "core" in _tags(t), t
    rng = np.random.default_rng(0)
    arrays = [_input(d, rng) for d in re.findall(r"%\w+: \w+\[[^\]]*\]", decls)]
    eager_in = [kiln.from_numpy(a.copy()) for a in arrays]
    graph_in = [kiln.from_numpy(a.copy()) for a in arrays]
    (want,) = fx.GraphModule({}, g)(*eager_in)
    (got,) = fx.GraphModule({}, r)(*graph_in)
    pairs = list(zip(got, want)) if isinstance(want, (tuple, list)) else [(got, want)]
    for a, b in pairs:
        assert a.dtype == b.dtype and tuple(a.shape) == tuple(b.shape)
        np.testing.assert_allclose(a.numpy().astype(np.float64), b.numpy().astype(np.float64),
                                   rtol=2e-3, atol=2e-3)
    for a, b in zip(graph_in, eager_in):  # in-place ops mutate their input the same way
        np.testing.assert_allclose(a.numpy(), b.numpy())


def test_retrace_with_composites_decomposed_makes_aliasing_explicit():
    """What AOT autograd functionalizes: ops as called, but composites without a derivative
    formula of their own decomposed (reshape: a view, or a clone and a view)."""
    g = fx.parse("""graph @f(%x: f32[3, 4]) {
  %t = call_function aten.t(%x)
  %r = call_function aten.reshape(%t, [12])
  %r2 = call_function aten.reshape(%x, [12])
  output (%r, %r2)
}""")
    targets = [n.target for n in kiln._C._fx.retrace(g, "aten", True).nodes if n.op == "call_function"]
    assert targets == ["aten.t", "aten.clone", "aten.view", "aten.view"]
    assert "aten.reshape" in [n.target for n in kiln._C._fx.retrace(g, "aten").nodes]
