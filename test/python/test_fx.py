"""kiln.fx: the graph IR from Python — text round trips, symbolic tracing against torch.fx,
GraphModule code, the Interpreter, graph editing and the C++ passes."""
import copy
import math
import random

import kiln
import kiln.nn.functional as F
import numpy as np
import pytest
from kiln import fx, nn
from oracle import assert_match, need_torch, sample

# -- (a) random graphs survive print -> parse -> print ----------------------------------------

DTYPES = [kiln.bool, kiln.uint8, kiln.int8, kiln.int16, kiln.int32, kiln.int64, kiln.float16,
          kiln.bfloat16, kiln.float32, kiln.float64]
SHORT = ["b8", "u8", "i8", "i16", "i32", "i64", "f16", "bf16", "f32", "f64"]
DEVICES = ["cpu", "meta", "cuda", "cuda:0", "cuda:3"]
SYMBOLIC_DIMS = ["s0", "s1", "batch", "2*s0", "s0 + 1", "s1 - 3", "floordiv(s0, 2)", "mod(s1, 3)",
                 "s0*s1 + -2", "(s0 + 1)*4", "2*3", "-s0 + 8", "floordiv(s0 + s1, mod(s1, 7))"]
FLOATS = [0.0, -0.0, 1.0, 0.1, -2.5, 1e-05, 1e16, 1e-300, 5e-324, 1.7976931348623157e308, math.inf,
          -math.inf, math.nan, 123456789.125, 1 / 3]
STRING_CHARS = ['a', 'Z', ' ', '"', '\\', '\n', '\t', '\r', '\x00', '\x1f', '\x7f', 'é', '漢', '%', '@', '{']


def rand_dim(r):
    return r.choice(SYMBOLIC_DIMS) if r.random() < 0.3 else str(r.choice([0, 1, 2, 3, 7, 16, 1024, 2**40]))


def rand_tensor_type(r):
    sizes = [rand_dim(r) for _ in range(r.randint(0, 4))]
    extra = []
    if r.random() < 0.3:
        extra.append("strides=[" + ", ".join(rand_dim(r) for _ in sizes) + "]")
    device = r.choice(DEVICES)
    if device != "cpu" or r.random() < 0.1:
        extra.append(f"device={device}")
    return r.choice(SHORT) + "[" + ", ".join(sizes) + "]" + ("{" + ", ".join(extra) + "}" if extra else "")


def rand_type(r, depth=0):
    k = r.random()
    if k < 0.75 or depth > 2:
        return rand_tensor_type(r)
    if k < 0.88:
        items = [rand_type(r, depth + 1) for _ in range(r.randint(0, 3))]
        return "(" + ", ".join(items) + ("," if len(items) == 1 else "") + ")"
    return r.choice(["int", "float", "bool"])


def rand_float(r):
    k = r.random()
    if k < 0.5:
        return r.choice(FLOATS)
    if k < 0.75:
        return r.uniform(-1e6, 1e6)
    return r.random() * 10.0 ** r.randint(-30, 30)


def rand_str(r):
    return "".join(r.choice(STRING_CHARS) for _ in range(r.randint(0, 6)))


def rand_const(r, depth=0):
    k = r.randrange(14 if depth < 3 else 9)
    if k == 0:
        return None
    if k == 1:
        return r.random() < 0.5
    if k == 2:
        return r.choice([0, 1, -1, 7, 2**63 - 1, -2**63, r.randint(-10**12, 10**12)])
    if k == 3:
        return rand_float(r)
    if k == 4:
        return rand_str(r)
    if k == 5:
        return r.choice(DTYPES)
    if k == 6:
        return kiln.device(r.choice(DEVICES))
    if k == 7:
        return ...
    if k == 8:
        return r.randint(-5, 5)
    if k == 9:
        return slice(*(r.choice([None, r.randint(-4, 4)]) for _ in range(3)))
    if k == 10:
        return [rand_const(r, depth + 1) for _ in range(r.randint(0, 3))]
    if k == 11:
        return tuple(rand_const(r, depth + 1) for _ in range(r.randint(0, 3)))
    if k == 12:
        return {rand_str(r): rand_const(r, depth + 1) for _ in range(r.randint(0, 3))}
    return [[rand_const(r, depth + 2)], (rand_const(r, depth + 2),)]


def schema_value(r, arg, index, tensors, numbers):
    """A value fitting one schema argument: earlier nodes for tensors, constants otherwise."""
    t = arg["type"]
    if arg["optional"] and r.random() < 0.2:
        return None
    if t == "Tensor":
        if index > 0 and r.random() < 0.2:
            return r.choice([2, -1.5, True])
        return r.choice(tensors)
    if t == "Tensor[]":
        return [r.choice(tensors) for _ in range(r.randint(1, 3))]
    if t == "Tensor?[]":
        return [r.choice(tensors + [None]) for _ in range(r.randint(1, 3))]
    if t == "int":
        return r.choice(numbers) if numbers and r.random() < 0.2 else r.randint(-3, 5)
    if t == "int[]":
        return [r.randint(0, 5) for _ in range(r.randint(0, 3))] if r.random() < 0.8 else r.randint(0, 5)
    if t == "float":
        return rand_float(r) if r.random() < 0.8 else r.randint(-3, 3)
    if t == "float[]":
        return [rand_float(r) for _ in range(r.randint(0, 3))]
    if t == "bool":
        return r.random() < 0.5
    if t == "Scalar":
        return r.choice([r.randint(-3, 3), rand_float(r), True])
    if t == "ScalarType":
        return r.choice(DTYPES)
    if t == "Device":
        return kiln.device(r.choice(DEVICES))
    if t == "str":
        return rand_str(r)
    return None


SCHEMAS = None


def op_schemas():
    global SCHEMAS
    if SCHEMAS is None:
        SCHEMAS = [kiln._C._fx.op_schema(t) for t in kiln._C._fx.op_targets()]
    return SCHEMAS


def add_op_call(r, g, tensors, numbers):
    schema = r.choice(op_schemas())
    args, kwargs = [], {}
    positional = [a for a in schema["args"] if not a["kwarg_only"]]
    keyword = [a for a in schema["args"] if a["kwarg_only"]]
    # Every positional up to the last required one (optional ones may come before it, as in
    # native_batch_norm_backward), then a random prefix of the defaulted ones (or some as keywords).
    required = max((i + 1 for i, a in enumerate(positional) if not a["has_default"] and not a["optional"]),
                   default=0)
    count = r.randint(required, len(positional))
    for i, a in enumerate(positional):
        value = schema_value(r, a, i, tensors, numbers)
        if i < count:
            args.append(value)
        elif r.random() < 0.3:
            kwargs[a["name"]] = value
    for a in keyword:
        if (not a["has_default"] and not a["optional"]) or r.random() < 0.4:
            kwargs[a["name"]] = schema_value(r, a, len(positional), tensors, numbers)
    type_expr = None
    kinds = [ret[1] for ret in schema["returns"]]
    if kinds and all(k == "Tensor" for k in kinds) and r.random() < 0.6:
        types = [rand_tensor_type(r) for _ in kinds]
        type_expr = types[0] if len(types) == 1 else "(" + ", ".join(types) + ")"
    n = g.call_function(schema["target"], tuple(args), kwargs, type_expr=type_expr)
    if len(kinds) == 1 and kinds[0] == "Tensor":
        tensors.append(n)
    return n


def fresh_name(r, g):
    while True:
        name = r.choice([str(r.randint(0, 99)), f"v{r.randint(0, 99)}", "output", "add", "x_1"])
        if g.find_node(name) is None:
            return name


def random_graph(r, index):
    name = r.choice([f"g{index}", f"graph {index}", f"fn_{index}", f"\"q\"{index}"])
    g = fx.Graph(name)
    tensors, numbers, everything = [], [], []
    for i in range(r.randint(1, 4)):
        p = g.placeholder(fresh_name(r, g) if r.random() < 0.3 else f"in{i}", rand_tensor_type(r) if i == 0 else None)
        tensors.append(p)
        everything.append(p)
    for _ in range(r.randint(0, 14)):
        k = r.random()
        if k < 0.45:
            n = add_op_call(r, g, tensors, numbers)
        elif k < 0.6:
            n = g.call_function(r.choice(["operator.getitem", "operator.add", "math.sqrt", "kiln.add", "torch.add",
                                          "my_lib.helpers.fn"]),
                                (r.choice(everything), rand_const(r)), {"k": rand_const(r)} if r.random() < 0.3 else None)
        elif k < 0.72:
            n = g.call_method(r.choice(["sum", "view", "add_", "t", "size"]), (r.choice(everything), rand_const(r)),
                              {"dim": rand_const(r)} if r.random() < 0.5 else None)
        elif k < 0.84:
            n = g.call_module(r.choice(["layers.0", "block.attn", "my-block", "0"]),
                              (r.choice(everything), [r.choice(everything)]), {"scale": rand_float(r)})
        else:
            n = g.get_attr(r.choice(["weight", "layers.0.bias", "a b.c", "buffers.7"]))
        if r.random() < 0.3 and not n.target.startswith(("aten.", "prims.")):  # ops keep types fitting their returns
            n.meta["type"] = rand_type(r)
            if n.meta["type"].kind == "int":
                numbers.append(n)
        if r.random() < 0.3:
            n.meta["source_loc"] = (rand_str(r) + ".py", r.randint(0, 10**6), r.choice(["forward", "my fn", "<lambda>"]))
        everything.append(n)
    k = r.random()
    if k < 0.4:
        g.output(r.choice(everything))
    elif k < 0.8:
        g.output(tuple(r.sample(everything, r.randint(1, len(everything)))))
    else:
        g.output({"out": r.choice(everything), "rest": [rand_const(r), r.choice(everything)]})
    return g


def test_random_graphs_round_trip_through_the_text_form():
    r = random.Random(20240917)
    texts = []
    for i in range(300):
        g = random_graph(r, i)
        g.lint()
        text = str(g)
        parsed = fx.parse(text)
        assert str(parsed) == text
        assert parsed.structurally_equal(g)
        assert str(parsed.clone()) == text
        compile(g.python_code().src, f"<graph {i}>", "exec")  # the generated code is valid Python
        texts.append(text)
    # Several graphs in one text.
    many = fx.parse_all("\n".join(texts[:20]))
    assert "\n".join(str(g) for g in many) == "\n".join(texts[:20])


def test_argument_values_come_back_as_python_values():
    g = fx.Graph()
    x = g.placeholder("x")
    values = (None, True, -2**63, 2.5, math.inf, "a\"\n\\é", kiln.float16, kiln.device("cuda:1"), ...,
              slice(None, 3, x), [1, (2,), {"k": x}], ())
    n = g.call_function("my.fn", values)
    back = fx.parse(str(g)).find_node(n.name).args
    assert back[:7] == values[:7] and back[8] is ...
    assert isinstance(back[7], kiln.device) and str(back[7]) == "cuda:1"
    assert back[9].stop == 3 and back[9].step.name == "x"
    assert back[10][:2] == [1, (2,)] and back[10][2]["k"].name == "x" and back[11] == ()


@pytest.mark.parametrize("bad, kind, message", [
    (object(), TypeError, "cannot use a 'object' as a graph argument"),
    (2**70, ValueError, "int64"),
    ({1: 2}, TypeError, "dict keys"),
    (lambda: 0, TypeError, "graph argument"),
])
def test_unrepresentable_arguments_raise(bad, kind, message):
    g = fx.Graph()
    x = g.placeholder("x")
    with pytest.raises(kind, match=message):
        g.call_function("my.fn", (x, bad))
    with pytest.raises(TypeError, match="get_attr"):
        g.call_function("my.fn", (kiln.ones(2),))
    deep = []
    for _ in range(300):
        deep = [deep]
    with pytest.raises(ValueError, match="deeper"):
        g.call_function("my.fn", (deep,))


def test_types():
    t = fx.Type("f32[8, s0]{strides=[1, 8], device=cuda:0}")
    assert t.kind == "tensor" and t.dtype is kiln.float32 and t.shape == (8, "s0") and t.stride == (1, 8)
    assert str(t.device) == "cuda:0" and not t.is_static and str(t) == "f32[8, s0]{strides=[1, 8], device=cuda:0}"
    assert fx.Type("i64[2, 3]").stride == (3, 1) and fx.Type("f16[s0, 4, 2]").stride == (8, 2, 1)
    assert fx.Type("f16[2, s0, 3]").stride == ("3*s0", 3, 1)
    tup = fx.Type("(f32[2], i64[2])")
    assert tup.kind == "tuple" and [str(e) for e in tup.elements] == ["f32[2]", "i64[2]"]
    assert fx.Type("f32[2*3]") == fx.Type("f32[6]") and hash(fx.Type("int")) == hash(fx.Type("int"))
    with pytest.raises(ValueError, match="unknown type 'f33'"):
        fx.Type("f33[2]")
    with pytest.raises(ValueError, match="after the type"):
        fx.Type("f32[2] f32[3]")
    with pytest.raises(TypeError, match="not a tensor type"):
        _ = fx.Type("int").shape
    x = kiln.zeros(3, 4).t()
    assert str(fx.type_of(x)) == "f32[4, 3]{strides=[1, 4]}"
    assert str(fx.type_of((kiln.zeros(2, dtype=kiln.int64), 3, 2.0, True))) == "(i64[2], int, float, bool)"
    assert str(fx.tensor_type(kiln.bfloat16, ["s0", 2], device="meta")) == "bf16[s0, 2]{device=meta}"


def test_parse_errors_point_at_the_text():
    with pytest.raises(ValueError, match=r"<string>:2:\d+: error: use of undefined value %y"):
        fx.parse("graph @f(%x) {\n  %a = call_function aten.add.Tensor(%x, %y)\n  output %a\n}\n")
    with pytest.raises(ValueError, match="unknown op 'aten.add'; overloads of add: aten.add.Tensor"):
        fx.parse("graph @f(%x) {\n  %a = call_function aten.add(%x, %x)\n  output %a\n}\n")
    with pytest.raises(ValueError, match="expected exactly one graph, found 2"):
        fx.parse("graph @a() {\n output None\n}\ngraph @b() {\n output None\n}\n")


# -- (b) symbolic tracing, compared with torch.fx -------------------------------------------------

def mlp(lib, layernorm):
    layers = [lib.nn.Linear(4, 8), lib.nn.GELU(), lib.nn.Linear(8, 3)]
    if layernorm:
        layers.insert(1, lib.nn.LayerNorm(8))
    return lib.nn.Sequential(*layers)


def copy_params(src_torch, dst_kiln):
    with kiln.no_grad():
        for (tn, tp), (kn, kp) in zip(src_torch.named_parameters(), dst_kiln.named_parameters()):
            assert tn == kn
            kp.copy_(kiln.from_numpy(tp.detach().numpy().copy()))


def torch_ops(gm):
    """op/target pairs of a torch.fx graph, with callables named as kiln names them."""
    torch_fx = pytest.importorskip("torch.fx")
    out = []
    for n in gm.graph.nodes:
        target = n.target
        if n.op == "call_function":
            target = torch_fx.node._get_qualified_name(target)
            target = {"getattr": "builtins.getattr", "_operator": "operator"}.get(target, target)
            target = target.replace("torch.", "kiln.", 1).replace("_operator.", "operator.", 1)
        out.append((n.op, target))
    return out


def kiln_ops(gm):
    return [(n.op, n.target) for n in gm.graph.nodes]


@pytest.mark.parametrize("layernorm", [False, True])
def test_trace_sequential_mlp_matches_module_and_torch_fx(layernorm):
    torch = need_torch()
    torch_fx = pytest.importorskip("torch.fx")

    km, tm = mlp(kiln, layernorm), mlp(torch, layernorm)
    copy_params(tm, km)
    gm = fx.symbolic_trace(km)
    tgm = torch_fx.symbolic_trace(tm)
    assert kiln_ops(gm) == torch_ops(tgm)
    assert isinstance(gm, nn.Module) and type(gm).__name__ == "Sequential"
    a = sample((5, 4), "float32")
    x, tx = kiln.from_numpy(a), torch.from_numpy(a.copy())
    assert_match(gm(x), tm(tx).detach())
    np.testing.assert_array_equal(gm(x).detach().numpy(), km(x).detach().numpy())
    # The text form of the traced graph parses back to the same graph.
    text = str(gm.graph)
    assert fx.parse(text).structurally_equal(gm.graph) and str(fx.parse(text)) == text
    # .code is what forward runs, and it runs on its own too.
    assert gm.code.startswith("def forward(self, input):")
    namespace = {"kiln": kiln}
    exec(gm.code, namespace)
    np.testing.assert_array_equal(namespace["forward"](gm, x).detach().numpy(), gm(x).detach().numpy())
    assert [n for n, _ in gm.named_parameters()] == [n for n, _ in km.named_parameters()]


def test_trace_functional_code_matches_torch_fx():
    torch = need_torch()
    torch_fx = pytest.importorskip("torch.fx")

    class TBlock(torch.nn.Module):
        def __init__(self):
            super().__init__()
            self.fc = torch.nn.Linear(4, 4)
            self.register_buffer("scale", torch.ones(4) * 0.5)

        def forward(self, x):
            h = torch.nn.functional.relu(self.fc(x))
            h = h * self.scale + x
            h = h.view(x.shape[0], 2, 2)
            return h[:, 0], -h.sum(dim=-1)

    class KBlock(nn.Module):
        def __init__(self):
            super().__init__()
            self.fc = nn.Linear(4, 4)
            self.register_buffer("scale", kiln.ones(4) * 0.5)

        def forward(self, x):
            h = F.relu(self.fc(x))
            h = h * self.scale + x
            h = h.view(x.shape[0], 2, 2)
            return h[:, 0], -h.sum(dim=-1)

    km, tm = KBlock(), TBlock()
    copy_params(tm, km)
    gm = fx.symbolic_trace(km)
    assert kiln_ops(gm) == torch_ops(torch_fx.symbolic_trace(tm))
    a = sample((3, 4), "float32")
    assert_match(gm(kiln.from_numpy(a)), tuple(t.detach() for t in tm(torch.from_numpy(a))))
    assert fx.parse(str(gm.graph)).structurally_equal(gm.graph)
    assert "h = " not in gm.code and "x.shape" in gm.code and "scale = self.scale" in gm.code
    # Source locations point into this file, at the line that made the node.
    relu = gm.graph.find_nodes(op="call_function", target=F.relu)[0]
    loc = relu.meta["source_loc"]
    with open(__file__) as source:
        line = source.read().splitlines()[loc.line - 1]
    assert loc.file == __file__ and loc.function == "forward" and "F.relu(self.fc(x))" in line


def test_trace_functions_autowrap_and_constants():
    mask = kiln.tensor([1.0, 0.0, 1.0])
    from kiln import add as kiln_add

    def fn(x, y):
        z = kiln_add(x, y, alpha=2)
        z = mask * z + kiln.exp(z) / math.sqrt(4.0)
        return kiln.nn.functional.sigmoid(z) if False else z * math.sqrt(x.shape[0])

    gm = fx.symbolic_trace(fn)
    targets = [n.target for n in gm.graph.nodes]
    assert targets[:3] == ["x", "y", "kiln.add"] and "_tensor_constant0" in targets and "math.sqrt" in targets
    assert kiln.add is kiln._C._ops.add and kiln_add is kiln._C._ops.add  # patches are undone
    x, y = kiln.tensor([1.0, 2.0, 3.0]), kiln.tensor([0.5, -1.0, 2.0])
    np.testing.assert_allclose(gm(x, y).detach().numpy(), fn(x, y).detach().numpy(), rtol=1e-6)
    assert fx.parse(str(gm.graph)).structurally_equal(gm.graph)


def clipped_scale(x, scale):
    """Control flow on a value: cannot be traced into, so it is a leaf (kiln.fx.wrap)."""
    return x * scale if scale > 0 else x


fx.wrap("clipped_scale")


def leaky(x):
    return x if x.sum() > 0 else x * 0.1


def test_wrap_and_autowrap_functions_make_leaves():
    def fn(x):
        return clipped_scale(x, 2.0) + leaky(x)

    with pytest.raises(fx.TraceError, match="control flow"):
        fx.symbolic_trace(fn)
    tracer = fx.Tracer(autowrap_functions=(leaky,))
    graph = tracer.trace(fn)
    assert [n.target for n in graph.nodes] == ["x", "test_fx.clipped_scale", "test_fx.leaky", "operator.add", "output"]
    gm = fx.GraphModule(tracer.attributes(), graph)
    x = kiln.tensor([1.0, -3.0])
    np.testing.assert_allclose(gm(x).detach().numpy(), fn(x).detach().numpy())
    assert fx.resolve_target("test_fx.leaky") is leaky
    fx.register_target("helpers.scaled", lambda x: x * 3)
    np.testing.assert_array_equal(fx.resolve_target("helpers.scaled")(kiln.ones(1)).detach().numpy(), [3.0])
    with pytest.raises(NameError, match="no function named 'nope'"):
        fx.wrap("nope")


def test_trace_errors_and_options():
    class Branchy(nn.Module):
        def forward(self, x):
            if x.sum() > 0:
                return x
            return -x

    with pytest.raises(fx.TraceError, match="control flow"):
        fx.symbolic_trace(Branchy())
    assert kiln.add is kiln._C._ops.add and nn.Module.__call__.__name__ == "__call__"
    with pytest.raises(fx.TraceError, match="len"):
        fx.symbolic_trace(lambda x: len(x))
    with pytest.raises(fx.TraceError, match="iterated"):
        fx.symbolic_trace(lambda x: [a for a in x])
    with pytest.raises(fx.TraceError, match=r"cannot trace <lambda>'s \*xs parameter"):
        fx.symbolic_trace(lambda *xs: xs[0])

    def scaled(x, scale, flip=False):
        return -x * scale if flip else x * scale

    gm = fx.symbolic_trace(scaled, concrete_args={"flip": True})
    assert [n.op for n in gm.graph.nodes] == ["placeholder", "placeholder", "call_function", "call_function", "output"]
    np.testing.assert_array_equal(gm(kiln.ones(2), 3.0).detach().numpy(), [-3.0, -3.0])
    with pytest.raises(fx.TraceError, match="does not take"):
        fx.symbolic_trace(scaled, concrete_args={"nope": 1})

    class Outer(nn.Module):  # user modules are traced into, kiln.nn layers stay calls
        def __init__(self):
            super().__init__()
            self.inner = nn.Sequential(nn.ReLU(), nn.Identity())

        def forward(self, x):
            return self.inner(x) + 1

    gm = fx.symbolic_trace(Outer())
    assert kiln_ops(gm)[1:4] == [("call_module", "inner.0"), ("call_module", "inner.1"), ("call_function", "operator.add")]
    # A GraphModule traces again to the same graph.
    again = fx.symbolic_trace(gm)
    assert kiln_ops(again) == kiln_ops(gm)


# -- GraphModule ----------------------------------------------------------------------------------

def test_graph_module_from_dict_code_and_recompile():
    g = fx.Graph("affine")
    x = g.placeholder("x", "f32[2, 3]")
    w = g.get_attr("layer.0.weight", "f32[3]")
    m = g.call_function("aten.mul.Tensor", (x, w))
    g.output(g.call_method("add", (m, 1.0), {"alpha": 2}))
    gm = fx.GraphModule({"layer.0.weight": kiln.tensor([1.0, 2.0, 3.0])}, g, "Affine")
    assert type(gm).__name__ == "Affine" and [n for n, _ in gm.named_buffers()] == ["layer.0.weight"]
    assert "mul = aten.mul.Tensor(x, layer_0_weight)" in gm.code and "getattr(self.layer, '0').weight" in gm.code
    x_value = kiln.ones(2, 3)
    np.testing.assert_array_equal(gm(x_value).detach().numpy(), [[3.0, 4.0, 5.0]] * 2)
    text = gm.print_readable(print_output=False)
    assert "# x: f32[2, 3]" in text and "# f32[3]" in text and "class Affine(kiln.nn.Module):" in text
    # Edit the graph, recompile, and forward follows.
    with g.inserting_after(m):
        neg = g.call_function("operator.neg", (m,))
    m.replace_all_uses_with(neg)
    neg.update_arg(0, m)
    gm.recompile()
    assert "neg = -mul" in gm.code
    np.testing.assert_array_equal(gm(x_value).detach().numpy(), [[1.0, 0.0, -1.0]] * 2)
    with pytest.raises(RuntimeError, match="not in the dict"):
        fx.GraphModule({}, g)
    unknown = fx.parse("graph @u(%x) {\n  %y = call_function no_such_module.fn(%x)\n  output %y\n}\n")
    with pytest.raises(ValueError, match="cannot resolve call_function target 'no_such_module.fn'"):
        fx.GraphModule({}, unknown)(1)
    shallow = copy.copy(gm)
    assert shallow.graph is not gm.graph and shallow.layer is not gm.layer
    assert getattr(shallow.layer, "0").weight is getattr(gm.layer, "0").weight and shallow.code == gm.code


def test_graph_module_deep_copy():
    gm = fx.symbolic_trace(nn.Sequential(nn.ReLU(), nn.Tanh()))
    deep = copy.deepcopy(gm)
    assert deep.graph is not gm.graph and deep.get_submodule("1") is not gm.get_submodule("1")
    assert type(deep).__name__ == "Sequential" and deep.code == gm.code
    np.testing.assert_array_equal(deep(kiln.tensor([-1.0, 2.0])).detach().numpy(), gm(kiln.tensor([-1.0, 2.0])).detach().numpy())


def test_codegen_names_and_constants():
    g = fx.Graph()
    p = g.placeholder("0")
    k = g.call_function("operator.getitem", (p, (slice(None, -1), None, ..., 2)), name="kiln")
    c = g.call_function("kiln.full", ([2], -math.inf), {"dtype": kiln.float64, "device": kiln.device("cpu")},
                        name="lambda")
    g.output((k, c, float("nan"), -0.0))
    src = g.python_code().src
    assert "def forward(self, _0):" in src and "kiln_1 = _0[:-1, None, ..., 2]" in src
    assert 'lambda_1 = kiln.full([2], -float("inf"), dtype=kiln.float64, device=kiln.device("cpu"))' in src
    gm = fx.GraphModule({}, g)
    x = kiln.arange(12).view(3, 4)
    out = gm(x)
    assert out[0].shape == x[:-1, None, ..., 2].shape == (2, 1)
    assert out[1].dtype == kiln.float64 and math.isnan(out[2]) and math.copysign(1.0, out[3]) == -1.0
    # Keyword and overload names that are Python keywords.
    g = fx.Graph()
    x = g.placeholder("x")
    u = g.call_function("aten.uniform_", (x,), {"from": 2.0, "to": 3.0})
    g.output(g.call_function("aten.random_.from", (u, 5, 6)))
    src = g.python_code().src
    assert "uniform_ = aten.uniform_(x, to=3.0, **{'from': 2.0})" in src
    assert "random_ = _fx_target_0(uniform_, 5, 6)" in src
    np.testing.assert_array_equal(fx.GraphModule({}, g)(kiln.zeros(3)).detach().numpy(), [5.0, 5.0, 5.0])


# -- (c) the Interpreter --------------------------------------------------------------------------

def test_interpreter_matches_direct_calls():
    km = mlp(kiln, True)
    gm = fx.symbolic_trace(km)
    x = kiln.from_numpy(sample((2, 4), "float32"))
    np.testing.assert_array_equal(fx.Interpreter(gm).run(x).detach().numpy(), km(x).detach().numpy())

    class SwapGelu(fx.Interpreter):
        def call_module(self, target, args, kwargs):
            if target == "2":  # the GELU
                return kiln.nn.functional.relu(*args)
            return super().call_module(target, args, kwargs)

    reference = nn.Sequential(km[0], km[1], nn.ReLU(), km[3])
    np.testing.assert_array_equal(SwapGelu(gm).run(x).detach().numpy(), reference(x).detach().numpy())
    interp = fx.Interpreter(gm, garbage_collect_values=False)
    interp.run(x)
    assert len(interp.env) == len(gm.graph)
    with pytest.raises(RuntimeError, match="expected a positional argument for parameter input"):
        fx.Interpreter(gm).run()


def test_interpreter_runs_aten_targets_and_reports_the_failing_node():
    g = fx.parse("""graph @f(%x: f32[2, 3], %y: f32[3]) {
  %add = call_function aten.add.Tensor(%x, %y, alpha=2)
  %mm = call_function aten.mm(%add, %add)
  output (%add, %mm)
}
""")
    gm = fx.GraphModule({}, g)
    x, y = kiln.ones(2, 3), kiln.tensor([1.0, 2.0, 3.0])
    with pytest.raises(RuntimeError) as info:
        fx.Interpreter(gm).run(x, y)
    assert "While executing %mm = call_function aten.mm(%add, %add)" in "".join(info.value.__notes__)
    g2 = fx.parse(str(g).replace("aten.mm(%add, %add)", "aten.mul.Tensor(%add, %add)"))
    add, mul = fx.Interpreter(fx.GraphModule({}, g2)).run(x, y)
    np.testing.assert_array_equal(add.detach().numpy(), kiln.add(x, y, alpha=2).detach().numpy())
    np.testing.assert_array_equal(mul.detach().numpy(), (add * add).detach().numpy())
    assert fx.resolve_target("aten.add.Tensor") is fx.aten.add.Tensor
    assert fx.qualified_name(fx.aten.add.Tensor) == "aten.add.Tensor" and fx.qualified_name(kiln.add) == "kiln.add"
    assert fx.qualified_name(math.sqrt) == "math.sqrt" and fx.resolve_target("operator.add")(2, 3) == 5
    with pytest.raises(ValueError, match="register_target"):
        fx.qualified_name(lambda: 0)
    with pytest.raises(ValueError, match="overloads of add"):
        fx.resolve_target("aten.add.Nope")


# -- (d) editing ----------------------------------------------------------------------------------

def small_graph():
    g = fx.Graph("f")
    x = g.placeholder("x", "f32[4]")
    a = g.call_function("aten.relu", (x,))
    b = g.call_function("aten.neg", (a,))
    out = g.output(b)
    return g, x, a, b, out


def test_node_freed_by_a_pass_after_it_was_read():
    # A handle remembers that its node was live until some graph frees a node
    # (ir/GraphGeneration.h): a node erased by a C++ pass, or left behind when a pass replaces the
    # whole graph, must still raise after it was read.
    g, x, a, b, out = small_graph()
    with g.inserting_before(out):
        dead = g.call_function("aten.exp", (x,))
    assert dead.op == "call_function" and dead.args == (x,) and not dead._erased
    assert g.eliminate_dead_code()
    assert dead._erased
    with pytest.raises(RuntimeError, match="no longer in graph @f"):
        _ = dead.op
    assert x.op == "placeholder" and b.op == "call_function" and b.args == (a,)
    g._run_passes("decompose-prims")  # the graph is replaced by its retrace
    assert x._erased and b._erased
    with pytest.raises(RuntimeError, match="no longer in graph"):
        _ = x.op
    assert g.find_node("x").op == "placeholder" and not g.find_node("x")._erased


def test_insert_erase_replace():
    g, x, a, b, out = small_graph()
    with g.inserting_before(b):
        c = g.call_function("aten.exp", (a,))
    assert [n.name for n in g.nodes] == ["x", "relu", "exp", "neg", "output"]
    d = g.call_function("aten.abs", (x,))  # the insertion point is back at the end
    assert g.nodes[-1] is d and g.find_node("abs") is d
    g.erase_node(d)
    assert d._erased and repr(d) == "<erased node abs>"
    with pytest.raises(RuntimeError, match="no longer in graph @f"):
        _ = d.args
    with pytest.raises(RuntimeError, match=r"cannot erase %relu: it still has 2 user\(s\): %neg, %exp"):
        g.erase_node(a)
    changed = a.replace_all_uses_with(x)
    assert changed == [b, c] and a.users == {} and list(x.users) == [a, b, c]
    b.args = (c,)
    g.erase_node(a)
    b.append(c)
    assert str(g).splitlines()[1:3] == ["  %neg = call_function aten.neg(%exp)", "  %exp = call_function aten.exp(%x)"]
    with pytest.raises(RuntimeError, match="%neg: uses %exp before its definition"):
        g.lint()
    b.prepend(c)
    g.lint()
    assert str(g) == ("graph @f(%x: f32[4]) {\n  %exp = call_function aten.exp(%x)\n"
                      "  %neg = call_function aten.neg(%exp)\n  output %neg\n}\n")
    with g.inserting_after(None):
        pass
    with g.inserting_before(None):
        early = g.placeholder("y")
    assert g.nodes[0] is early
    assert b.prev is c and c.next is b and out.prev is b and out.next is None
    assert b.all_input_nodes == [c] and x.users == {c: None}
    assert b.replace_all_uses_with(2.5) == [out] and out.args == (2.5,)
    c.append(early)
    assert [n.name for n in g.nodes][:3] == ["x", "exp", "y"]


def test_node_identity_meta_and_cross_graph_checks():
    g, x, a, _, _ = small_graph()
    assert g.nodes[1] is a and {a: 1}[g.find_node("relu")] == 1
    assert a.meta.get("type") is None and "type" not in a.meta
    a.meta["type"] = "f32[4]"
    a.meta["source_loc"] = ("m.py", 3, "forward")
    assert a.meta["tensor_meta"].shape == (4,) and a.meta["source_loc"] == fx.SourceLoc("m.py", 3, "forward")
    assert str(g).splitlines()[1] == '  %relu = call_function aten.relu(%x) : f32[4] loc("m.py":3:forward)'
    assert a.format_node() == '%relu = call_function aten.relu(%x) : f32[4] loc("m.py":3:forward)'
    del a.meta["source_loc"]
    with pytest.raises(KeyError, match="holds only"):
        a.meta["val"] = 1
    with pytest.raises(KeyError, match="derived"):
        a.meta["tensor_meta"] = None
    other = fx.Graph("other")
    with pytest.raises(RuntimeError, match="belongs to graph @f, not to @other"):
        other.call_function("aten.relu", (x,))
    with pytest.raises(RuntimeError, match="a node named %x already exists in @f"):
        g.call_function("aten.relu", (x,), name="x")
    assert g.placeholder("x").name == "x_1"
    with pytest.raises(ValueError, match="unknown node op"):
        g.create_node("call_nothing", "x")
    copy = g.clone()
    assert copy.structurally_equal(g) and copy.find_node("relu") is not a


@pytest.mark.parametrize("text, message", [
    ("graph @f(%x) {\n  %w = get_attr w\n  %p = call_function aten.relu(%x, %w)\n  output %p\n}\n",
     "aten.relu expects at most 1 positional argument"),
    ("graph @f(%x) {\n  %p = call_function aten.add.Tensor(%x, %x, beta=2)\n  output %p\n}\n",
     "has no argument named 'beta'"),
    ("graph @f(%x) {\n  %p = call_function aten.neg(%x) : (f32[2], f32[2])\n  output %p\n}\n",
     "returns a Tensor, but the node is annotated with"),
])
def test_lint_reports_problems(text, message):
    g = fx.parse(text)
    with pytest.raises(RuntimeError, match=r"graph @f is not well formed:\n  line \d+: %p: .*" + message):
        g.lint()


def test_lint_structure():
    g, _, _, b, out = small_graph()
    g.lint()
    with g.inserting_before(out):
        g.output(b)
    with pytest.raises(RuntimeError, match="a second output node"):
        g.lint()
    g2 = fx.Graph("t")
    g2.placeholder("x")
    g2.output(None)
    with pytest.raises(RuntimeError, match="missing type annotation"):
        g2.lint(require_types=True)


# -- (e) passes -----------------------------------------------------------------------------------

def test_passes_dce_cse_shape_prop():
    g = fx.parse("""graph @f(%x: f32[4, 3], %y: f32[3]) {
  %a = call_function aten.add.Tensor(%x, %y)
  %b = call_function aten.add.Tensor(%x, %y)
  %unused = call_function aten.exp(%a)
  %m = call_function aten.mul.Tensor(%a, %b)
  %t = call_method t(%m)
  output %t
}
""")
    assert [p for p, _ in fx.passes.available()] == ["dce", "cse", "shape-prop", "constant-fold",
                                                     "decompose-core-aten", "decompose-prims",
                                                     "functionalize", "merge-slice-writes"]
    fx.passes.run(g, "dce")
    assert g.find_node("unused") is None
    fx.passes.run(g, "cse")
    assert g.find_node("b") is None and g.find_node("m").args == (g.find_node("a"), g.find_node("a"))
    log = fx.passes.run(g, "shape-prop", print_after_all=True)
    assert "IR after shape-prop" in log
    assert str(g.find_node("m").meta["type"]) == "f32[4, 3]" and str(g.find_node("t").type) == "f32[3, 4]{strides=[1, 3]}"
    x, y = kiln.ones(4, 3), kiln.arange(3.0)
    np.testing.assert_array_equal(fx.GraphModule({}, g)(x, y).detach().numpy(), ((x + y) * (x + y)).t().detach().numpy())
    with pytest.raises(RuntimeError, match="unknown pass 'fold'"):
        fx.passes.run(g, "fold")
    assert g.eliminate_dead_code() is False


def test_shape_prop_pass_errors_and_python_shape_prop():
    g = fx.parse("graph @f(%x) {\n  %a = call_function aten.neg(%x)\n  output %a\n}\n")
    with pytest.raises(RuntimeError, match="in pass 'shape-prop'.*no type annotation"):
        fx.passes.run(g, "shape-prop")
    gm = fx.symbolic_trace(mlp(kiln, True))
    fx.passes.ShapeProp(gm).propagate(kiln.zeros(5, 4))
    assert [str(n.meta["type"]) for n in gm.graph.nodes if n.op != "output"] == ["f32[5, 4]", "f32[5, 8]", "f32[5, 8]",
                                                                                "f32[5, 8]", "f32[5, 3]"]
    assert "# f32[5, 8]" in gm.print_readable(print_output=False)

    def with_dead_code(x):
        unused = x * 2  # noqa: F841
        return x + 1

    gm2 = fx.symbolic_trace(with_dead_code)
    fx.passes.run(gm2, "dce")
    assert [n.target for n in gm2.graph.nodes] == ["x", "operator.add", "output"] and "*" not in gm2.code
    np.testing.assert_array_equal(gm2(kiln.ones(2)).detach().numpy(), [2.0, 2.0])
