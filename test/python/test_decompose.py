"""kiln.fx.retrace (the make_fx analogue) at the aten / core_aten / prims levels, and the
aot_eager backend: decomposed graphs compute what the eager ops compute."""
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
    for gone in ("aten.linear", "aten.layer_norm", "aten.softmax.int", "aten.log_softmax.int",
                 "aten.var.dim", "aten.logsumexp", "aten.t"):
        assert gone not in targets
    for t in targets:
        assert t.startswith("prims.") or "core" in _tags(t), t
    prims = fx.retrace(g, "prims")
    for t in _ops(prims):
        assert t.startswith("prims.") or "core" in _tags(t), t


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
