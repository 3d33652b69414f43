"""Frame capture of each kind of value the tracer must model: tensors of every dtype and
layout, Python constants, nested tuple/list/dict inputs and outputs, user functions and
closures, nn.Modules (user-defined and kiln's own), builtins, library functions, Tensor
methods and tensor attributes used in Python control flow.
"""
import numpy as np
import pytest

from capture_lib import Call, assert_same, check_compiles, lib  # noqa: F401  (lib is a fixture)


def rand(T, *shape, seed=0, dtype="float32"):
    return T.from_numpy(np.random.default_rng(seed).standard_normal(shape).astype(dtype))


# --- tensors -------------------------------------------------------------------------------

@pytest.mark.parametrize("dtype", ["float32", "float64", "float16", "int64", "int32", "bool"])
def test_tensor_dtypes(lib, dtype):
    T = lib.T

    def arith(x, y):
        z = x * y + x
        return z, z.sum(), (x == y), x.to(T.float32) * 0.5

    def logic(x, y):  # bool tensors: the same kinds of ops that keep bool
        return x & y, x | y, x.sum(), x.to(T.float32) * 0.5

    a = np.random.default_rng(0).integers(0, 5, size=(3, 4)).astype(dtype)
    b = np.random.default_rng(1).integers(0, 5, size=(3, 4)).astype(dtype)
    check_compiles(lib, logic if dtype == "bool" else arith, [(T.from_numpy(a), T.from_numpy(b))])


def test_tensor_layouts(lib):
    T = lib.T

    def fn(x, y, s):
        return x + 1, (x * y).sum(dim=0), s * 2 + x, x.contiguous()

    x = rand(T, 4, 3)
    calls = [
        (x, rand(T, 4, 3, seed=1), T.tensor(2.5)),  # contiguous, 0-d
        (x.t(), rand(T, 3, 4, seed=1), T.tensor(2.5)),  # transposed input
        (rand(T, 6, 8)[::2, 1::2], rand(T, 3, 4, seed=1)[:, :4], T.tensor(1.0)),  # strided slices
        (rand(T, 0, 4), rand(T, 0, 4), T.tensor(0.0)),  # zero-size
    ]
    check_compiles(lib, fn, calls[:1])
    compiled = lib.compile(fn)
    for i, args in enumerate(calls):
        assert_same(compiled(*args), fn(*args), where=f"call{i}")


def test_tensor_results_are_fresh_or_aliased_like_eager(lib):
    """Returning an input and a view of it: the compiled result holds the same values."""
    T = lib.T

    def fn(x):
        return x, x.view(-1), x * 1

    x = rand(T, 2, 3)
    compiled = lib.compile(fn)
    a, b, c = compiled(x)
    assert_same((a, b, c), fn(x))


# --- Python constants, nested containers ---------------------------------------------------

def test_python_constant_inputs_and_outputs(lib):
    def fn(x, i, f, b, s, none):
        y = x * i + f
        if b:
            y = -y
        return y, i + 1, f * 2, not b, s + "!", none, (i, s), [f, none]

    x = rand(lib.T, 3)
    check_compiles(lib, fn, [(x, 3, 0.5, True, "name", None), (x, 4, 0.5, False, "other", None)])


def test_nested_container_inputs_and_outputs(lib):
    T = lib.T

    def fn(d, pair, lst):
        a = d["a"] + d["nested"]["b"][0]
        b = pair[0] * pair[1][1]
        c = [t.sum() for t in lst]
        return {"sum": a, "parts": (b, [c[0], {"last": c[-1]}]), "n": len(lst)}, (a, (b,))

    x = rand(T, 3)
    d = {"a": x, "nested": {"b": [rand(T, 3, seed=1), 7]}}
    pair = (rand(T, 3, seed=2), (0.5, rand(T, 3, seed=3)))
    lst = [rand(T, 2, seed=i) for i in range(3)]
    check_compiles(lib, fn, [(d, pair, lst)])


def test_empty_and_single_containers(lib):
    def fn(x, empty, one):
        y = x + len(empty)
        for t in one:
            y = y * t
        return y, (), [], {}, (y,)

    check_compiles(lib, fn, [(rand(lib.T, 2), [], (rand(lib.T, 2, seed=1),))])


# --- functions and closures passed in ------------------------------------------------------

def test_user_function_arguments(lib):
    T = lib.T

    def act_relu(t):
        return T.relu(t)

    def make_scaler(k):
        def scale(t):
            return t * k
        return scale

    def fn(x, act, post):
        return post(act(x) + 1)

    x = rand(T, 5)
    check_compiles(lib, fn, [(x, act_relu, make_scaler(2.0)), (x, T.sigmoid, make_scaler(3.0)),
                             (x, lambda t: t.tanh(), act_relu)])


# --- library functions and Tensor methods --------------------------------------------------

def test_library_functions(lib):
    T = lib.T
    F = T.nn.functional

    def fn(x, y):
        c = T.cat([x, y], dim=0)
        s = T.stack((x, y), dim=1)
        w = T.where(x > 0, x, y)
        m = T.matmul(x, y.t())
        g = F.gelu(x)
        sm = F.softmax(x, dim=-1)
        ln = F.layer_norm(x, (x.shape[-1],))
        z = T.zeros(x.shape, dtype=x.dtype)
        o = T.ones_like(y)
        mx = T.maximum(x, y)
        return c, s, w, m, g, sm, ln, z + o, mx, T.exp(x).log()

    check_compiles(lib, fn, [(rand(T, 2, 3), rand(T, 2, 3, seed=1))])


def test_tensor_methods(lib):
    T = lib.T

    def fn(x):
        a = x.view(2, 6).reshape(3, 4).permute(1, 0).transpose(0, 1)
        b = x.unsqueeze(0).squeeze(0).flatten()
        c1, c2 = x.chunk(2, dim=1)
        parts = x.split(1, dim=0)
        m = x.max(dim=1)
        return (a.contiguous(), b, c1 + c2, len(parts), x.softmax(dim=-1), x.float().double(),
                x.mean(), x.std(), x.argmax(dim=0), m.values, m.indices, x.abs().sqrt(),
                x.clamp(min=-0.5, max=0.5), x.sum(dim=(0, 1)), x.masked_fill(x > 0, 0.0))

    check_compiles(lib, fn, [(rand(T, 3, 4),)])


def test_tensor_attributes_specialize(lib):
    """shape/dtype/ndim/device are Python values during capture; the results follow them."""
    T = lib.T

    def fn(x):
        n, m = x.shape
        out = x.reshape(n * m)
        if x.dtype == T.float64:
            out = out * 2
        scale = 1.0 / x.shape[-1]
        rows = [x[i] * scale for i in range(x.shape[0])]
        return out, rows, x.ndim, x.dtype, str(x.device), tuple(x.size())

    check_compiles(lib, fn, [(rand(T, 2, 3),)])
    compiled = lib.compile(fn)
    for x in (rand(T, 2, 3), rand(T, 4, 2, dtype="float64"), rand(T, 1, 5)):
        assert_same(compiled(x), fn(x))


# --- nn.Module -----------------------------------------------------------------------------

def make_block(T):
    nn = T.nn

    class Block(nn.Module):
        def __init__(self, d, hidden, use_norm=True):
            super().__init__()
            self.fc1 = nn.Linear(d, hidden)
            self.fc2 = nn.Linear(hidden, d, bias=False)
            self.norm = nn.LayerNorm(d) if use_norm else None
            self.scale = nn.Parameter(T.ones(d) * 0.5)
            self.use_norm = use_norm

        def forward(self, x):
            h = self.fc2(T.relu(self.fc1(x)))
            if self.use_norm:  # a Python attribute of the module: specialized
                h = self.norm(h)
            return x + h * self.scale

    return Block


def init_params(T, module, seed=0):
    with T.no_grad():
        for i, (_, p) in enumerate(module.named_parameters()):
            a = np.random.default_rng(seed + i).standard_normal(tuple(p.shape)).astype("float32") * 0.3
            p.copy_(T.from_numpy(a))
    return module


def test_user_module_called_in_function(lib):
    T = lib.T
    block = init_params(T, make_block(T)(4, 8))

    def fn(x):
        return block(x).sum(dim=-1), block(x * 2)

    check_compiles(lib, fn, [(rand(T, 3, 4),)])


def test_compile_user_module(lib):
    T = lib.T
    block = init_params(T, make_block(T)(4, 8, use_norm=False))
    compiled = lib.compile(block)
    assert compiled._orig_mod is block
    x = rand(T, 2, 4)
    out = compiled(x)
    assert_same(out, block(x))  # requires_grad included: parameters require grad
    lib.reset()
    e = lib.explain(block, x)
    assert (e.graph_count, len(e.break_reasons)) == (1, 0)


def test_library_modules(lib):
    T = lib.T
    nn = T.nn
    model = init_params(T, nn.Sequential(nn.Linear(6, 12), nn.GELU(), nn.LayerNorm(12), nn.Linear(12, 3)))
    check_compiles(lib, model, [(rand(T, 5, 6),), (rand(T, 2, 6, seed=1),)])
    with T.no_grad():
        check_compiles(lib, model, [(rand(T, 5, 6),)])


def test_module_parameters_are_graph_attributes(lib):
    """kiln keeps parameters in the graph as get_attr nodes (the input is the one placeholder);
    torch 2.13 lifts them to graph inputs (placeholders), so there only the count is checked."""
    T = lib.T
    nn = T.nn
    model = init_params(T, nn.Sequential(nn.Linear(4, 4), nn.GELU(), nn.Linear(4, 2)))
    backend, graphs = lib.counting_backend()
    compiled = lib.compile(model, backend=backend)
    x = rand(T, 3, 4)
    assert_same(compiled(x), model(x))
    assert len(graphs) == 1
    ops = [n.op for n in graphs[0].graph.nodes]
    n_params = len(list(model.parameters()))
    if lib.is_kiln:
        assert ops.count("placeholder") == 1, ops
        assert ops.count("get_attr") == n_params, ops
        for n in graphs[0].graph.nodes:
            if n.op == "get_attr":
                assert hasattr(graphs[0], n.target), n.target
    else:
        assert ops.count("placeholder") + ops.count("get_attr") == 1 + n_params, ops


def test_module_state_change_recompiles(lib):
    """Flipping a Python attribute the forward branches on must not reuse the old graph."""
    T = lib.T
    block = init_params(T, make_block(T)(4, 8))
    compiled = lib.compile(block)
    x = rand(T, 2, 4)
    assert_same(compiled(x), block(x))
    block.use_norm = False
    assert_same(compiled(x), block(x))
    block.use_norm = True
    with T.no_grad():
        block.scale.mul_(3.0)  # an in-place parameter update is seen by the next call
    assert_same(compiled(x), block(x))


def test_global_and_closure_tensors(lib):
    T = lib.T
    table = {"w": rand(T, 3, seed=4)}
    bias = rand(T, 3, seed=5)

    def fn(x):
        return x * table["w"] + bias

    check_compiles(lib, fn, [(rand(T, 3),)])
    compiled = lib.compile(fn)
    x = rand(T, 3)
    compiled(x)
    with T.no_grad():
        bias.add_(10.0)  # mutation of a captured tensor is visible (no stale copy)
    assert_same(compiled(x), fn(x))


def test_method_of_user_object(lib):
    T = lib.T

    class Scaler:
        def __init__(self, k):
            self.k = k

        def apply(self, t):
            return t * self.k + self.offset()

        def offset(self):
            return self.k / 2

    s = Scaler(3.0)

    def fn(x):
        return s.apply(x), s.k

    check_compiles(lib, fn, [(rand(T, 4),)])
    compiled = lib.compile(fn)
    s.k = 5.0  # guarded: a changed attribute gives a new result
    x = rand(T, 4)
    assert_same(compiled(x), fn(x))


def test_compile_decorated_method(lib):
    T = lib.T

    class Model(T.nn.Module):
        def __init__(self):
            super().__init__()
            self.w = T.nn.Parameter(rand(T, 3))

        @lib.compile
        def forward(self, x):
            return x * self.w

    m = Model()
    x = rand(T, 3)
    out = m(x)
    with T.no_grad():
        exp = x * m.w
    assert_same(out.detach(), exp)


def test_call_keyword_arguments_of_compiled(lib):
    def fn(x, *, alpha=1.0, beta=0.0):
        return x * alpha + beta

    x = rand(lib.T, 3)
    check_compiles(lib, fn, [Call(x), Call(x, alpha=2.0), Call(x, beta=3.0, alpha=0.5)])
