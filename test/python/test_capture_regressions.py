"""Regressions found while bringing up capture (kiln only; compiled results against kiln eager)."""
import numpy as np
import pytest

import kiln

nn = kiln.nn


@pytest.fixture(autouse=True)
def _fresh_caches():
    kiln.compiler.reset()
    yield
    kiln.compiler.reset()


def graphs_of(fn, *args):
    seen = []

    def backend(gm, example_inputs):
        seen.append(gm)
        return gm.forward

    out = kiln.compile(fn, backend=backend)(*args)
    return out, seen


def close(a, b):
    assert a.dtype == b.dtype and a.shape == b.shape and a.device == b.device
    np.testing.assert_allclose(a.detach().numpy(), b.detach().numpy(), rtol=1e-6, atol=1e-6)


class Base(nn.Module):
    def __init__(self):
        super().__init__()
        self.lin = nn.Linear(6, 6)

    def forward(self, x):
        return self.lin(x)


class Sub(Base):
    def forward(self, x):
        return super().forward(x).relu()


class Point:
    def __init__(self, x):
        super().__init__()
        self.x = x


def test_zero_argument_super_is_inlined():
    m, x = Sub(), kiln.randn(4, 6)
    out, seen = graphs_of(m, x)
    close(out, m(x))
    assert len(seen) == 1 and not kiln.explain(m)(x).break_reasons


def test_super_init_of_an_object_made_while_tracing():
    def fn(x):
        return Point(x * 2).x + 1

    x = kiln.randn(3)
    out, seen = graphs_of(fn, x)
    close(out, fn(x))
    assert len(seen) == 1


def test_a_fakes_device_never_reaches_the_graph():
    # type_as / to(other) read the other tensor's device: while tracing it is a meta fake.
    def fn(x):
        return x.type_as(x.double()), x.to(x.half()).float(), kiln.zeros(2, device=x.device)

    x = kiln.randn(4)
    out, seen = graphs_of(fn, x)
    for got, want in zip(out, fn(x)):
        close(got, want)
    assert "meta" not in str(seen[0].graph)


def test_replacing_a_submodule_of_a_container_recompiles():
    seq = nn.Sequential(nn.Linear(3, 3), nn.ReLU())
    calls = []

    def backend(gm, example_inputs):
        calls.append(gm)
        return gm.forward

    f = kiln.compile(seq, backend=backend)
    x = kiln.randn(2, 3)
    f(x)
    f(x)
    assert len(calls) == 1
    seq[0] = nn.Linear(3, 3)
    close(f(x), seq(x))
    assert len(calls) == 2
    names = [n.target for n in calls[1].graph.nodes if n.op == "get_attr"]
    assert names == ["_0_weight", "_0_bias"]


def test_tensor_made_from_python_data_inside_library_code_is_not_baked(monkeypatch):
    """A patched kiln.nn.functional.dropout drawing its mask with numpy inside nn.Dropout.forward
    (kiln library code, run for real on the fakes while tracing) made a real tensor that was
    lifted into the graph as a constant: every later call reused the first mask. Now the frame
    runs eagerly and each call draws."""
    import numpy as np

    r = np.random.default_rng(0)

    def dropout(input, p=0.5, training=True, inplace=False):
        mask = (r.random(tuple(input.shape)) >= p).astype(np.float32)
        return input * kiln.from_numpy(mask)

    monkeypatch.setattr(kiln.nn.functional, "dropout", dropout)
    model = kiln.nn.Sequential(kiln.nn.ReLU(), kiln.nn.Dropout(0.5))
    compiled = kiln.compile(model)
    x = kiln.ones(64)
    outs = [compiled(x).tolist() for _ in range(3)]
    assert outs[0] != outs[1] or outs[1] != outs[2]


@pytest.mark.parametrize("make", [lambda p: kiln.optim.SGD(p, lr=0.1, momentum=0.9),
                                  lambda p: kiln.optim.AdamW(p, lr=0.01)], ids=["sgd", "adamw"])
def test_compiled_optimizer_step_runs_and_matches_eager(make):
    """kiln.compile(lambda: opt.step()) segfaulted: the step (kiln library code, run for real
    while tracing) met the real parameters, and the recorder's C++ 'unsupported' exception
    unwound through the step's Python frame, leaving CPython's frame chain dangling. The step is
    now traced (grads as graph inputs, the state dict keyed by parameters) and compiled; it
    updates what eager updates, within an ulp (eager's `add_(alpha=...)` is one FMA; the
    compiled kernels round the product and the sum apart)."""
    results = []
    for compiled in (False, True):
        kiln.manual_seed(0)
        model = kiln.nn.Linear(4, 3)
        opt = make(model.parameters())
        step = kiln.compile(lambda: opt.step()) if compiled else opt.step
        for _ in range(3):
            opt.zero_grad()
            model(kiln.ones(2, 4)).square().sum().backward()
            step()
        results.append([p.detach().numpy().copy() for p in model.parameters()])
    for a, b in zip(*results):
        np.testing.assert_allclose(a, b, rtol=0, atol=1e-6)


def test_module_dict_views_and_instance_dict_are_traced():
    """`ModuleDict.items()` ("iterating a odict_items") and nn.Module.__getattr__'s
    `self.__dict__` ("a descriptor") used to break: both are read as guarded dicts."""
    heads = nn.ModuleDict({"a": nn.Linear(3, 2), "b": nn.Linear(3, 4)})
    seq = nn.Sequential(nn.Linear(3, 3))

    def fn(x):
        outs = {name: head(x) for name, head in heads.items()}
        first = seq.__getattr__("0")
        return outs["a"].sum() + outs["b"].sum() + first(x).sum(), list(heads.keys())

    x = kiln.randn(5, 3)
    (total, keys), graphs = graphs_of(fn, x)
    assert len(graphs) == 1 and keys == ["a", "b"]
    close(total, fn(x)[0])
    e = kiln.explain(fn)(x)
    assert (e.graph_count, e.graph_break_count, len(e.break_reasons)) == (1, 0, 0), str(e)
    # A head swapped in after compiling is seen (the dict's entries are guarded).
    heads["a"] = nn.Linear(3, 2)
    compiled = kiln.compile(fn)
    close(compiled(x)[0], fn(x)[0])


def test_getattr_with_a_default_of_a_missing_attribute_is_traced():
    # getattr(obj, name, default) ignored the default: a missing attribute sent the whole frame
    # to eager execution with no break reported (0 graphs, 0 breaks).
    lin = kiln.nn.Linear(4, 3)

    class Cfg:
        scale = 2.0

    cfg = Cfg()

    def f(x):
        y = lin(x) * getattr(cfg, "scale", 1.0) + getattr(cfg, "shift", 0.5)
        if getattr(lin, "missing", None) is None and not hasattr(lin, "nothere"):
            y = y - 1
        return y

    x = kiln.randn(2, 4)
    kiln.compiler.reset()
    e = kiln.explain(f)(x)
    assert (e.graph_count, e.graph_break_count) == (1, 0), e.break_reasons
    kiln.compiler.reset()
    np.testing.assert_array_equal(kiln.compile(f)(x).detach().numpy(), f(x).detach().numpy())


def test_an_exception_caught_by_a_try_block_is_traced_once():
    # `try: s = o.scale except AttributeError:` made the tracer give up as "the user's code
    # raised": the frame ran eagerly, traced again at every call, with no break reported. Then
    # it was a graph break at the lookup, once. Now the except clause is traced (one graph, as
    # torch.compile), the keys of o's __dict__ guarded: setting o.scale recompiles, deleting it
    # finds the first graph again.
    class Obj:
        pass

    o = Obj()
    traces = []

    def counting(gm, example_inputs, **kwargs):
        traces.append(gm)
        return gm.forward

    def fn(x):
        y = x * 2
        try:
            s = o.scale
        except AttributeError:
            s = 3.0
        return y * s

    x = kiln.randn(4)
    kiln.compiler.reset()
    e = kiln.explain(fn)(x)
    assert e.graph_count == 1 and not e.all_break_reasons, str(e)
    kiln.compiler.reset()
    compiled = kiln.compile(fn, backend=counting)
    for _ in range(3):
        np.testing.assert_allclose(compiled(x).numpy(), (x * 6).numpy())
    o.scale = 5.0
    np.testing.assert_allclose(compiled(x).numpy(), (x * 10).numpy())
    del o.scale
    np.testing.assert_allclose(compiled(x).numpy(), (x * 6).numpy())
    assert len(traces) == 2
    kiln.compiler.reset()


def test_a_compiled_bound_method_called_from_traced_code_is_inlined():
    # step = kiln.compile(model.step) called inside a compiled loop: the bound method was not
    # traced through ("calling <bound method ...>"), a break inside the loop, and the whole
    # frame ran eagerly (kv_cache_decode: 0 graphs, torch.compile 1).
    class Net(kiln.nn.Module):
        def __init__(self):
            super().__init__()
            self.lin = kiln.nn.Linear(4, 4)

        def step(self, x, k):
            return self.lin(x) * k

    net = Net()
    step = kiln.compile(net.step)

    def run(x):
        outs = []
        for k in range(3):
            x = step(x, k + 1)
            outs.append(x)
        return kiln.stack(outs)

    x = kiln.randn(2, 4)
    kiln.compiler.reset()
    e = kiln.explain(run)(x)
    assert (e.graph_count, e.graph_break_count, len(e.break_reasons)) == (1, 0, 0), str(e)
    kiln.compiler.reset()
    np.testing.assert_allclose(kiln.compile(run)(x).detach().numpy(), run(x).detach().numpy(), rtol=1e-6, atol=1e-6)
    kiln.compiler.reset()


def test_eval_inside_a_compiled_frame_reaches_library_modules():
    # model.eval() inside traced code was a side effect replayed after the graph, but a kiln
    # BatchNorm runs for real while tracing and read its real flag (still training): the compiled
    # eval forward normalized with batch statistics (pointnet: max abs error 0.1). Switching the
    # mode is a graph break now; setting the mode a module already has is nothing.
    model = kiln.nn.Sequential(kiln.nn.Linear(4, 4), kiln.nn.BatchNorm1d(4))
    x = kiln.randn(6, 4)
    model(x)  # running statistics away from the batch's

    def fn(x):
        model.train()
        y = model(x).sum()
        model.eval()
        with kiln.no_grad():
            out = model(x)
        model.train()
        return y, out

    state = {k: v.clone() for k, v in model.state_dict().items()}
    kiln.compiler.reset()
    y_c, out_c = kiln.compile(fn)(x)
    model.load_state_dict(state)
    y, out = fn(x)
    np.testing.assert_allclose(out_c.numpy(), out.numpy(), rtol=1e-5, atol=1e-5)
    assert model.training and model[1].training
    kiln.compiler.reset()


def test_tensors_made_from_python_data_in_traced_code_are_constants():
    # Each made a real tensor from Python data inside an op (refused by the tracer: the frame ran
    # eagerly): a number stored through a basic index, new_tensor (the fake's meta device), and
    # kiln.tensor(..., device=x.device) (a no-op .to() on the CPU).
    def fn(x):
        b = x.clone()
        b[0, 0] = 42
        b.unsqueeze(0).squeeze(0)[1, 1] = -1
        b[2] = 7.5
        return b + x.new_tensor([1.0, 2.0, 3.0]) + kiln.tensor([0.5, 0.25, 0.0], device=x.device)

    x = kiln.randn(3, 3)
    out, seen = graphs_of(fn, x)
    close(out, fn(x))
    e = kiln.explain(fn)(x)
    assert len(seen) == 1 and not e.break_reasons, str(e)


def test_autograd_grad_is_a_break_as_with_torch_compile():
    def fn(a, b):
        y = (a.tanh() @ b).sigmoid()
        loss = (y * y).sum()
        ga, gb = kiln.autograd.grad(loss, [a, b])
        return loss.detach(), ga * 2, gb

    def args():
        return kiln.randn(4, 5, requires_grad=True), kiln.randn(5, 3, requires_grad=True)

    a, b = args()
    for got, want in zip(kiln.compile(fn)(a, b), fn(a, b)):
        close(got, want)
    kiln.compiler.reset()
    e = kiln.explain(fn)(*args())
    assert (e.graph_count, e.graph_break_count) == (2, 1), str(e)
    assert "kiln.autograd.grad" in str(e.break_reasons[0])


def test_namedtuples_and_dataclasses_made_in_traced_code():
    # `Out(...)` was "constructing a Out object" (the frame ran eagerly); `type(r)` of a
    # dataclass made while tracing could not be passed to type(); a namedtuple's _fields was read
    # as a method. torch.compile traces all of these into one graph.
    import collections
    import dataclasses

    Out = collections.namedtuple("Out", ["logits", "hidden", "extra"], defaults=[None])

    @dataclasses.dataclass
    class Result:
        loss: object
        n: int = 0

    def fn(x):
        o = Out(x * 2, hidden=x + 1)
        r = Result(o.logits.sum())
        return (o, o._fields, type(r).__name__, isinstance(r, Result), r.loss * 3, o[1] - o.hidden,
                o.extra)

    x = kiln.randn(3)
    out, seen = graphs_of(fn, x)
    want = fn(x)
    assert type(out[0]) is Out and out[0].extra is None and out[1:4] == want[1:4] and out[6] is None
    for got, exp in ((out[0].logits, want[0].logits), (out[0].hidden, want[0].hidden), (out[4], want[4]),
                     (out[5], want[5])):
        close(got, exp)
    e = kiln.explain(fn)(x)
    assert len(seen) == 1 and not e.break_reasons, str(e)


def test_ops_refusing_meta_tensors_are_breaks_that_resume():
    # kiln.equal raised "attempted to run this operator with Meta tensors" (capital M): not taken
    # for a data-dependent op, the frame ran eagerly; now a break after which the frame compiles on
    # (torch.compile: 2 graphs, 1 break). And T.arange(3).type_as(x) (aten.to, which may alias)
    # copies: it is no view of the arange for the view check at the break.
    def fn(x):
        a = kiln.arange(3).type_as(x) + x
        same = kiln.equal(x, x.clone())
        return a * 2, same

    x = kiln.randn(3)
    out, seen = graphs_of(fn, x)
    close(out[0], fn(x)[0])
    assert out[1] is True
    e = kiln.explain(fn)(x)
    assert (e.graph_count, e.graph_break_count) == (2, 1), str(e)


def test_a_view_of_an_intermediate_alone_at_a_break_resumes():
    # `out.view(...)` of a computed value, live alone at a break of an inference graph, is as good
    # as a copy: the frame used to run eagerly as a whole. (A training graph still runs the
    # frame eagerly: its AOT backward would get the view for the saved base.)
    import io
    sink = io.StringIO()

    def fn(x, w):
        h = (x @ w).view(-1)
        print("h", file=sink)
        return h * 2

    x, w = kiln.randn(3, 4), kiln.randn(4, 2)
    close(kiln.compile(fn)(x, w), fn(x, w))
    kiln.compiler.reset()
    e = kiln.explain(fn)(x, w)
    assert (e.graph_count, e.graph_break_count) == (2, 1), str(e)


def test_inference_mode_results_stay_inference_tensors():
    # Traced as no_grad, results of inference_mode came out of the graph as ordinary tensors:
    # is_inference() False (torch: True), and a fake read it as False after a break.
    @kiln.inference_mode()
    def predict(x):
        return x * 2

    def decorated(x):
        y = predict(x)
        return y, y.is_inference()

    def block(x):
        with kiln.inference_mode():
            y = x * 2
        return y, y.is_inference()

    x = kiln.randn(3)
    for fn in (decorated, block):
        kiln.compiler.reset()
        y, flag = kiln.compile(fn)(x)
        assert y.is_inference() and flag is True, fn.__name__
        close(y, fn(x)[0])


def test_repr_of_a_tensor_is_a_break():
    # Run on the fake, repr() printed device='meta' (a 3.11 comprehension over tensors, now
    # captured on its own, returned it): as TorchDynamo, a break.
    def fn(x):
        y = x * 2
        return y + 1, [repr(t) for t in (y, x)], str(y)

    x = kiln.tensor([1.0, 2.5])
    got, want = kiln.compile(fn)(x), fn(x)
    close(got[0], want[0])
    assert got[1:] == want[1:] and "meta" not in got[2]


def test_autograd_grad_with_create_graph_is_traced():
    # A gradient penalty differentiates the gradient: through a compiled graph's backward (not
    # differentiable itself) that fails, so a double backward stays in the graph.
    def fn(x, w):
        y = (x * w).tanh().sum()
        g, = kiln.autograd.grad(y, x, create_graph=True)
        return (g ** 2).sum()

    def run(f):
        x = kiln.tensor([0.5, -1.0, 2.0], requires_grad=True)
        w = kiln.tensor([1.5, 0.5, -0.25], requires_grad=True)
        out = f(x, w)
        out.backward()
        return out, w.grad

    for got, want in zip(run(kiln.compile(fn)), run(fn)):
        close(got, want)


def test_gradient_penalty_through_a_linear_layer_is_traced():
    # WGAN-GP: the double backward reaches linear's transposed weight, which the composite made
    # inside one recorded node ("meta tensor that is not part of the graph (aten.t)"): the frame
    # is traced again with composites as their parts. It broke there, and the loss's backward
    # then met the compiled critic's backward ("create_graph=True through a compiled region").
    critic = kiln.nn.Sequential(kiln.nn.Linear(3, 8), kiln.nn.Tanh(), kiln.nn.Linear(8, 1))

    def fn(real, fake, eps):
        critic.zero_grad()
        mix = (eps * real + (1 - eps) * fake).requires_grad_(True)
        score = critic(mix)
        g, = kiln.autograd.grad(score, mix, grad_outputs=kiln.ones_like(score), create_graph=True)
        gp = ((g.norm(2, dim=1) - 1) ** 2).mean()
        loss = critic(fake).mean() - critic(real).mean() + 10 * gp
        loss.backward()
        return gp.detach(), loss.detach(), critic[0].weight.grad.clone(), critic[2].bias.grad.clone()

    real, fake = kiln.randn(5, 3), kiln.randn(5, 3)
    eps = kiln.rand(5, 1)
    want = fn(real, fake, eps)
    got = kiln.compile(fn)(real, fake, eps)
    for g, w in zip(got, want):
        close(g, w)


def test_an_input_handed_on_unchanged_is_the_argument_itself():
    # Handed on as a graph output, an input came back as an alias with the compiled graph's
    # grad_fn: autograd.grad(y, (x, unused), allow_unused=True) after a break gave zeros for
    # `unused` instead of None, and `f(x) is x` was False.
    def fn(x, unused):
        y = (x ** 3).sum()
        gx, gu = kiln.autograd.grad(y, (x, unused), allow_unused=True)
        return gx, gu is None, unused

    x, unused = kiln.randn(4, requires_grad=True), kiln.zeros(2, requires_grad=True)
    gx, none, same = kiln.compile(fn)(x, unused)
    close(gx, fn(x, unused)[0])
    assert none is True and same is unused
    kiln.compiler.reset()
    assert kiln.compile(lambda t: (t, t * 2))(x)[0] is x


def test_gradcheck_of_a_compiled_function_compiles_one_graph():
    # gradcheck calls the function in the caller's grad mode for the numerical jacobian too
    # (as torch's does; only its writes into the input run under no_grad): a compiled function
    # there used to compile a second graph for grad mode off.
    modes = []

    def f(t):
        modes.append(kiln.is_grad_enabled())
        return (t.sin() * t).cumsum(0)

    d = kiln.randn(4, dtype=kiln.float64, requires_grad=True)
    assert kiln.autograd.gradcheck(f, (d,), eps=1e-6, atol=1e-4)
    assert modes and all(modes)
    seen = []

    def backend(gm, example_inputs):
        seen.append(gm)
        return gm.forward

    def g(t):
        return (t.sin() * t).cumsum(0)

    assert kiln.autograd.gradcheck(kiln.compile(g, backend=backend), (d,), eps=1e-6, atol=1e-4)
    assert len(seen) == 1


def test_state_dicts_trace_ordered_dicts_sets_and_ids():
    # Module.state_dict() traced as torch.compile traces it (one graph of detaches): its
    # OrderedDict() made while tracing comes back an OrderedDict, `name not in
    # self._non_persistent_buffers_set` reads the set with its contents guarded, and an
    # optimizer's state_dict() keys its state by id() of the real parameters.
    import collections

    model = nn.Sequential(nn.Linear(3, 4), nn.BatchNorm1d(4))
    opt = kiln.optim.Adam(model.parameters(), lr=0.1)
    model(kiln.randn(5, 3)).sum().backward()
    opt.step()

    def fn(x):
        sd = model.state_dict()
        osd = opt.state_dict()
        return sd, osd, x * 2

    x = kiln.randn(2, 3)
    want = fn(x)
    out, seen = graphs_of(fn, x)
    assert len(seen) == 1
    # The detaches of the state_dict are in the graph (it used to break at OrderedDict()).
    assert sum(str(n.target) == "aten.detach" for n in seen[0].graph.nodes) == 7
    sd, osd, _ = out
    assert type(sd) is collections.OrderedDict and list(sd) == list(want[0])
    for k in sd:
        close(sd[k], want[0][k])
    assert sorted(osd["state"]) == sorted(want[1]["state"]) == [0, 1, 2, 3]
    assert osd["param_groups"][0]["params"] == want[1]["param_groups"][0]["params"]
    # The set's contents are guarded: a buffer made non-persistent recompiles and is left out.
    compiled = kiln.compile(lambda: model.state_dict())
    assert "1.running_mean" in compiled()
    model[1]._non_persistent_buffers_set.add("running_mean")
    try:
        assert "1.running_mean" not in compiled()
    finally:
        model[1]._non_persistent_buffers_set.discard("running_mean")


def test_a_set_from_outside_is_the_same_object_after_a_break_and_not_mutated_in_a_trace():
    seen = {"a"}

    def fn(x, names):
        y = x * 2 if "a" in names else x
        print("at", 1, file=SINK)
        names.add("b")           # a mutation: not traced, the real set gets it
        return y + 1

    want_names = set(seen)
    fn(kiln.randn(3), want_names)
    names = set(seen)
    out = kiln.compile(fn)(kiln.randn(3), names)
    assert names == want_names == {"a", "b"}
    assert out.shape == (3,)


class _Sink:
    def write(self, s):
        pass

    def flush(self):
        pass


SINK = _Sink()


def test_a_traced_shape_joins_a_literal_tuple_in_one_graph():
    # llama2.c's RoPE: x.reshape(x.shape[:-1] + (-1, 2)) broke the graph ("the operator add on
    # tuple and tuple": the traced shape is a tuple of values, the literal a constant).
    def f(x, extra):
        a = x.reshape(x.shape[:-1] + (-1, 2))
        b = x.reshape((1,) + x.shape)
        lst = [x.shape[0]] + [-1]
        lst += (2,)
        return a.sum(-1), b * 2, x.reshape(lst), x.reshape(tuple(extra) + x.shape[1:])

    x = kiln.randn(3, 4)
    out, graphs = graphs_of(f, x, [3])
    assert len(graphs) == 1
    for o, e in zip(out, f(x, [3])):
        close(o, e)
    with pytest.raises(TypeError, match="can only concatenate tuple"):
        kiln.compile(lambda t: t.reshape(t.shape + [1]), backend="eager")(x)


class _Parser:
    """Made inside the trace (einops' ParsedExpression): a static and a class method read
    through the instance."""

    def __init__(self, text):
        self.ok = self.check(text) and self.make() == "made"

    @staticmethod
    def check(text):
        return all(str.isalnum(c) or c == "_" for c in text)

    @classmethod
    def make(cls):
        return "made" if cls is _Parser else "?"


_BY_TYPE = {}


def test_library_python_that_einops_runs_traces_in_one_graph():
    # einops' recipe code broke the graph at each of these: a dict keyed by a class, str.isalnum(c),
    # set.difference(a, b), ",".join(a traced list), itertools.chain(*lists), and static/class
    # methods read through an instance.
    import itertools

    _BY_TYPE[type(kiln.ones(1))] = 2.0

    def f(x, names):
        factor = _BY_TYPE.get(type(x), None)
        left, right = {"a", "b"}, {"b"}
        extra = set.difference(left, right)
        joined = ",".join(list(names)) + "->"
        axes = list(itertools.chain(*[["a", "b"], ["c"]]))
        parser = _Parser("ab_c")
        p2 = _Parser.check("x")
        assert parser.ok and p2 and extra == {"a"} and joined == "a,b->" and axes == ["a", "b", "c"]
        return x * factor + len(axes)

    seen = []

    def backend(gm, example_inputs):
        seen.append(gm)
        return gm.forward

    x = kiln.randn(3)
    compiled = kiln.compile(f, backend=backend)
    close(compiled(x, ("a", "b")), x * 2.0 + 3)
    assert len(seen) == 1
    _BY_TYPE[type(kiln.ones(1))] = 3.0  # the class-keyed dict's value is guarded
    close(compiled(x, ("a", "b")), x * 3.0 + 3)
    assert len(seen) == 2


def test_a_set_updated_from_a_traced_list_stays_in_the_graph():
    # einops: left.identifiers.update(ell_axes) with ell_axes a list made while tracing.
    def f(x):
        ids = {"a"}
        ids.update(["b", "c"])
        ids.update(("d",))
        return x + len(ids)

    x = kiln.randn(2)
    out, graphs = graphs_of(f, x)
    assert len(graphs) == 1
    close(out, x + 4)
