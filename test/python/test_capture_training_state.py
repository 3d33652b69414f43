"""Capture of what a training step reads and writes besides tensors (issues 15 and 16):
Tensor.grad (a graph input read through its tensor at each call, guarded; `p.grad = None`
replayed after the graph), OrderedDict and defaultdict iteration (an nn.Module's registries, an
optimizer's hook tables and tensor-keyed state), generator functions unrolled with `yield` and
`yield from`, and nn.Module.parameters() / named_parameters() / modules() loops. Each compiled
function must equal eager with no graph break."""
from collections import OrderedDict, defaultdict

import numpy as np
import pytest

import kiln
from kiln.compiler import bytecode

pytestmark = pytest.mark.skipif(not bytecode.supported(), reason="capture targets CPython 3.11 to 3.13")


def _t(*shape, seed=0):
    r = np.random.default_rng(seed)
    return kiln.from_numpy(r.standard_normal(shape).astype("float32"))


def _explain(fn, *args):
    kiln.compiler.reset()
    e = kiln.explain(fn)(*args)
    kiln.compiler.reset()
    return e


def _mlp():
    kiln.manual_seed(0)
    return kiln.nn.Sequential(kiln.nn.Linear(4, 8), kiln.nn.ReLU(), kiln.nn.Linear(8, 3))


def _backward(model, x):
    for p in model.parameters():
        p.grad = None
    model(x).square().sum().backward()


def test_module_parameter_loops_compile_in_one_graph():
    model = _mlp()

    def fn(x):
        total = x.sum()
        for p in model.parameters():
            total = total + p.sum()
        for name, p in model.named_parameters():
            total = total + (p * len(name)).mean()
        n = sum(1 for _ in model.modules())
        return total * n, [p.detach().clone() for p in model.parameters()]

    x = _t(3, 4)
    e = _explain(fn, x)
    assert (e.graph_count, len(e.break_reasons)) == (1, 0), e.break_reasons
    want_total, want_params = fn(x)
    got_total, got_params = kiln.compile(fn)(x)
    np.testing.assert_allclose(got_total.detach().numpy(), want_total.detach().numpy(), rtol=1e-6)
    for g, w in zip(got_params, want_params):
        np.testing.assert_array_equal(g.numpy(), w.numpy())


def test_ordered_dict_values_items_keys_follow_move_to_end():
    table = OrderedDict([("a", _t(3, seed=1)), ("b", _t(3, seed=2)), ("c", _t(3, seed=3))])

    def fn(x):
        out = x
        for v in table.values():
            out = out * 2 + v
        for k, v in table.items():
            out = out - v * len(k)
        return out, list(table.keys())

    x = _t(3)
    e = _explain(fn, x)
    assert (e.graph_count, len(e.break_reasons)) == (1, 0), e.break_reasons
    compiled = kiln.compile(fn)
    for _ in range(2):
        got, keys = compiled(x)
        want, want_keys = fn(x)
        np.testing.assert_allclose(got.numpy(), want.numpy(), rtol=1e-6)
        assert keys == want_keys
        table.move_to_end("a")  # the order is guarded: the next call retraces in the new order


def test_generator_functions_unroll_yield_and_yield_from():
    def pairs(xs):
        for i, x in enumerate(xs):
            yield i, x

    def chained(xs):
        yield from pairs(xs)
        yield from ((9, x * 2) for x in xs)

    def fn(a, b):
        return [x * i for i, x in chained([a, b])]

    a, b = _t(2, seed=4), _t(2, seed=5)
    e = _explain(fn, a, b)
    assert (e.graph_count, len(e.break_reasons)) == (1, 0), e.break_reasons
    for got, want in zip(kiln.compile(fn)(a, b), fn(a, b)):
        np.testing.assert_allclose(got.numpy(), want.numpy(), rtol=1e-6)


def test_grad_reads_are_inputs_guarded_on_none_and_metadata():
    model = _mlp()
    params = list(model.parameters())

    def fn(scale):
        out = []
        for p in params:
            g = getattr(p, "grad", None)
            out.append(None if g is None else g * scale)
        return out

    compiled = kiln.compile(fn, backend="eager")
    scale = _t(1)
    assert compiled(scale) == [None] * len(params)  # no grads yet: guarded as None
    for seed in (6, 7):  # grads are new tensors after each backward: read at each call
        _backward(model, _t(5, 4, seed=seed))
        for got, p in zip(compiled(scale), params):
            np.testing.assert_allclose(got.numpy(), (p.grad * scale).numpy(), rtol=1e-6)
    e = _explain(fn, scale)
    assert (e.graph_count, len(e.break_reasons)) == (1, 0), e.break_reasons


def test_zero_grad_set_to_none_replays_and_in_place_zeroing_writes_the_grads():
    model = _mlp()
    opt = kiln.optim.SGD(model.parameters(), lr=0.1)

    def to_none(x):
        opt.zero_grad()
        return x + 1

    def to_zero(x):
        opt.zero_grad(set_to_none=False)
        return x + 1

    x = _t(5, 4)
    compiled_none, compiled_zero = kiln.compile(to_none), kiln.compile(to_zero)
    _backward(model, x)
    compiled_zero(x)
    assert all(p.grad is not None and not p.grad.any().item() for p in model.parameters())
    _backward(model, x)
    compiled_none(x)
    assert all(p.grad is None for p in model.parameters())
    _backward(model, x)
    e = _explain(to_none, x)
    # zero_grad runs eagerly, as torch.optim's (torch._disable_dynamo): a break at the call with
    # nothing before it, then the graph of `x + 1` (torch.compile: 1 graph).
    assert e.graph_count == 1 and e.graph_break_count == 0, e.break_reasons
    assert not e.break_reasons and ["zero_grad" in str(r) for r in e.all_break_reasons] == [True]


def test_tensor_keyed_defaultdict_state_is_read_and_extended():
    model = _mlp()
    params = list(model.parameters())
    state = defaultdict(dict)

    def fn(x):
        with kiln.no_grad():
            for p in params:
                s = state[p]
                buf = s.get("buf")
                if buf is None:
                    buf = p.detach().clone()
                    s["buf"] = buf
                else:
                    buf.mul_(0.5).add_(p)
        return x * 2

    x = _t(3)
    compiled = kiln.compile(fn, backend="eager")
    compiled(x)  # first call: the state gets a buffer per parameter
    assert [id(k) for k in state] == [id(p) for p in params]
    first = {id(p): state[p]["buf"] for p in params}
    for p in params:
        np.testing.assert_array_equal(state[p]["buf"].numpy(), p.detach().numpy())
    compiled(x)  # second call: the buffers are updated in place, not replaced
    for p in params:
        assert state[p]["buf"] is first[id(p)]
        np.testing.assert_allclose(state[p]["buf"].numpy(), 1.5 * p.detach().numpy(), rtol=1e-6)


def test_container_reached_twice_is_one_variable():
    """An optimizer's `self.state` read in each call of a helper was wrapped anew each time: the
    second mutation's replay overwrote the first's (AdamW kept the state of its last parameter
    only). A list or dict from outside is now one variable however often it is reached."""

    class Holder:
        def __init__(self):
            self.log = []
            self.table = {}

        def note(self, key, t):
            self.log.append(t * 2)
            self.table[key] = t + 1

    h = Holder()

    def fn(x):
        h.note("a", x)
        h.note("b", x * 3)
        return x

    x = _t(2)
    kiln.compile(fn, backend="eager")(x)
    assert len(h.log) == 2 and sorted(h.table) == ["a", "b"]
    np.testing.assert_allclose(h.log[1].numpy(), (x * 6).numpy(), rtol=1e-6)
    np.testing.assert_allclose(h.table["a"].numpy(), (x + 1).numpy(), rtol=1e-6)


def test_clip_grad_norm_reads_the_real_grads():
    """clip_grad_norm_(model.parameters(), ...) ran for real on the parameters' fakes, which have
    no .grad: nothing was clipped and the norm was 0. It is interpreted now (the grads are graph
    inputs), and isinstance() on the parameters' iterator no longer uses it up."""
    results = []
    for compiled in (False, True):
        model = _mlp()
        _backward(model, _t(5, 4))

        def clip():
            return kiln.nn.utils.clip_grad_norm_(model.parameters(), 0.1)

        norm = kiln.compile(clip)() if compiled else clip()
        results.append((float(norm), [p.grad.numpy().copy() for p in model.parameters()]))
    assert results[1][0] == pytest.approx(results[0][0], rel=1e-6) and results[0][0] > 0.1
    for got, want in zip(results[1][1], results[0][1]):
        np.testing.assert_allclose(got, want, rtol=1e-6)
    e = _explain(lambda: kiln.nn.utils.clip_grad_norm_(model.parameters(), 0.1))
    assert (e.graph_count, len(e.break_reasons)) == (1, 0), e.break_reasons


def test_library_code_reading_grad_of_a_fake_breaks_the_graph():
    """kiln library code runs for real on fakes; a fake's .grad would be None where the real
    tensor has a grad. Reading it raises inside the trace, which becomes a graph break."""
    model = _mlp()
    _backward(model, _t(5, 4))

    def grad_sum(ps):
        return sum(p.grad.sum() for p in ps)

    grad_sum.__module__ = "kiln.fake_library"  # run for real while tracing, as kiln's own code

    def fn(x):
        return grad_sum(list(model.parameters())) + x

    x = _t(1)
    np.testing.assert_allclose(kiln.compile(fn, backend="eager")(x).numpy(), fn(x).numpy(), rtol=1e-6)
    e = _explain(fn, x)
    # No graph before the call: the break is one of all_break_reasons only, as torch's explain.
    assert len(e.all_break_reasons) == 1 and "Tensor.grad" in str(e.all_break_reasons[0]), e.all_break_reasons
