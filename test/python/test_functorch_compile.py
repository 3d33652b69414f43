"""kiln.func's transforms (grad, vjp, jvp, jacrev, jacfwd, hessian, vmap, functional_call) inside
compiled functions (issue 16): traced into the caller's graph as torch.compile traces torch.func's
(one graph, no break, where before each transform was a break), the values and gradients equal
eager; kiln.linalg's LAPACK calls stay breaks with their reason."""
import numpy as np
import pytest

import kiln
from kiln import nn


pytestmark = pytest.mark.usefixtures("strict_capture")


def _counts(fn, *args):
    e = kiln.explain(fn)(*args)
    return e.graph_count, e.graph_break_count


def _leaves(x):
    if isinstance(x, dict):
        return [v for k in sorted(x) for v in _leaves(x[k])]
    if isinstance(x, (list, tuple)):
        return [v for item in x for v in _leaves(item)]
    return [x]


def _close(got, want, tol=1e-5):
    got, want = _leaves(got), _leaves(want)
    assert len(got) == len(want)
    for a, b in zip(got, want):
        assert tuple(a.shape) == tuple(b.shape)
        np.testing.assert_allclose(a.detach().numpy(), b.detach().numpy(), rtol=tol, atol=tol)


def _compiled_equals_eager(fn, *calls, tol=1e-5):
    compiled = kiln.compile(fn)
    for args in calls:
        _close(compiled(*args), fn(*args), tol)


def test_per_sample_grads_with_functional_call_and_vmap_are_one_graph():
    kiln.manual_seed(0)
    model = nn.Sequential(nn.Linear(6, 8), nn.Tanh(), nn.Linear(8, 3))

    def loss_one(params, x, y):
        out = kiln.func.functional_call(model, params, (x.unsqueeze(0),))
        return nn.functional.cross_entropy(out, y.unsqueeze(0))

    def fn(x, y):
        params = {k: v.detach() for k, v in model.named_parameters()}
        return kiln.func.vmap(kiln.func.grad(loss_one), in_dims=(None, 0, 0))(params, x, y)

    x, y = kiln.randn(4, 6), kiln.randint(0, 3, (4,))
    assert _counts(fn, x, y) == (1, 0)
    _compiled_equals_eager(fn, (x, y), (kiln.randn(4, 6), kiln.randint(0, 3, (4,))))
    # each sample's gradient is the gradient of its own loss
    g = kiln.compile(fn)(x, y)
    model.zero_grad()
    nn.functional.cross_entropy(model(x[2:3]), y[2:3]).backward()
    _close(g["0.weight"][2], model[0].weight.grad)


def test_jacrev_jacfwd_of_an_mlp_are_one_graph():
    w1, b1, w2 = kiln.randn(4, 6), kiln.randn(6), kiln.randn(6, 3)

    def mlp(x):
        return (x @ w1 + b1).tanh() @ w2

    def fn(x):
        return kiln.func.jacrev(mlp)(x), kiln.func.jacfwd(mlp)(x)

    assert _counts(fn, kiln.randn(4)) == (1, 0)
    _compiled_equals_eager(fn, (kiln.randn(4),), (kiln.randn(4),))


def test_hessian_vector_products_are_one_graph():
    A = kiln.randn(5, 5)

    def f(x):
        return ((x @ A).sin() * x).sum() + (x ** 3).sum()

    def fn(x, v):
        _, fwd = kiln.func.jvp(kiln.func.grad(f), (x,), (v,))
        _, vjp_fn = kiln.func.vjp(kiln.func.grad(f), x)
        return fwd, vjp_fn(v)[0], kiln.func.hessian(f)(x) @ v

    x, v = kiln.randn(5), kiln.randn(5)
    assert _counts(fn, x, v) == (1, 0)
    _compiled_equals_eager(fn, (x, v), (kiln.randn(5), kiln.randn(5)), tol=1e-4)


def test_grad_options_nested_and_vmap_dims():
    def f(a, b):
        return (a @ b).tanh().sum(), a.mean()

    def fn(a, b, c):
        ga, gb = kiln.func.grad(lambda p, q: f(p, q)[0], argnums=(0, 1))(a, b)
        g, (value, aux) = kiln.func.grad_and_value(f, has_aux=True)(a, b)
        gg = kiln.func.grad(lambda y: kiln.func.grad(lambda x: (x ** 3).sum())(y).sum())(c)
        m = kiln.func.vmap(lambda r, s: (r * s).sum(), in_dims=(1, None), out_dims=0)(a, c[:3])
        return ga, gb, g, value, aux, gg, m

    args = (kiln.randn(3, 4), kiln.randn(4, 2), kiln.randn(5))
    assert _counts(fn, *args) == (1, 0)
    _compiled_equals_eager(fn, args)


def test_grad_of_a_closed_over_parameter_keeps_the_outer_gradient():
    # MAML's inner step: the inner gradient stays differentiable with respect to the closed-over
    # weight, and the outer backward runs through the compiled graph's recorded backward ops.
    kiln.manual_seed(1)
    w = kiln.randn(4, 3, requires_grad=True)

    def fn(x):
        g = kiln.func.grad(lambda v: ((x @ w) * v).tanh().sum())(kiln.ones(3))
        return (g ** 2).sum()

    x = kiln.randn(5, 4)
    assert _counts(fn, x) == (1, 0)
    want = fn(x)
    (want_grad,) = kiln.autograd.grad(want, [w])
    got = kiln.compile(fn)(x)
    assert got.requires_grad
    (got_grad,) = kiln.autograd.grad(got, [w])
    _close(got, want)
    _close(got_grad, want_grad)


def test_gradient_penalty_through_func_grad_trains():
    # The gradient wrt an input that requires grad stays differentiable (create_graph), so a
    # penalty on it backpropagates into the weights through the compiled graph.
    kiln.manual_seed(2)
    lin = nn.Linear(3, 1)

    def fn(x):
        g = kiln.func.grad(lambda z: lin(z).sum())(x)
        return lin(x).mean() + ((g.norm(dim=-1) - 1) ** 2).mean()

    x = kiln.randn(6, 3, requires_grad=True)
    want = fn(x)
    want_grads = kiln.autograd.grad(want, [lin.weight, lin.bias, x])
    got = kiln.compile(fn)(x)
    got_grads = kiln.autograd.grad(got, [lin.weight, lin.bias, x])
    _close(got, want)
    _close(list(got_grads), list(want_grads))


def test_a_closed_over_float_is_guarded():
    scale = [2.0]

    def f(x):
        return (x * scale[0]).sin().sum()

    def fn(x):
        return kiln.func.grad(f)(x)

    compiled = kiln.compile(fn)
    x = kiln.randn(4)
    _close(compiled(x), fn(x))
    scale[0] = 3.0
    _close(compiled(x), fn(x))


def test_a_break_inside_the_function_runs_the_transform_eagerly_and_correctly():
    # A print inside jacfwd's function: the transform runs eagerly at a graph break, and its
    # function uncaptured (a compiled region's backward could not be differentiated again).
    w = kiln.randn(3, 2)
    seen = []

    def mlp(x):
        print("inside", file=_Sink(seen))
        return (x @ w).tanh()

    def fn(x):
        return kiln.func.jacfwd(mlp)(x) * 2

    e = kiln.explain(fn)(kiln.randn(3))
    assert e.all_break_reasons and all("print()" in str(r) for r in e.all_break_reasons)
    x = kiln.randn(3)
    _close(kiln.compile(fn)(x), fn(x))
    assert seen


class _Sink:
    def __init__(self, seen):
        self.seen = seen

    def write(self, text):
        self.seen.append(text)

    def flush(self):
        pass


def test_an_error_inside_a_transform_is_the_users():
    def fn(x):
        return kiln.func.grad(lambda y: y * 2)(x)  # not a scalar

    with pytest.raises(RuntimeError, match="scalar"):
        kiln.compile(fn)(kiln.randn(3))


def test_linalg_calls_are_captured_and_equal_eager():
    # linalg.solve is an op of the table (a fallback kernel of the compiled graph), not a break.
    def fn(a, b):
        m = a @ a.mT + kiln.eye(3) * 3
        x = kiln.linalg.solve(m, b)
        return x.relu() + kiln.linalg.norm(a, dim=(-2, -1)).unsqueeze(-1)

    a, b = kiln.randn(2, 3, 3), kiln.randn(2, 3)
    e = kiln.explain(fn)(a, b)
    assert (e.graph_count, e.graph_break_count) == (1, 0), e.break_reasons
    _compiled_equals_eager(fn, (a, b), (kiln.randn(2, 3, 3), kiln.randn(2, 3)))


def test_next_takes_one_item_of_a_traced_iterator():
    # Regression: next() ran for real on the iterator's remaining items, so the second next()
    # raised StopIteration while tracing and the frame ran eagerly (kiln.func's pytree unflatten
    # of a dict argument took the whole frame out of the graph).
    def fn(x):
        it = iter([x, x + 1, x + 2])
        a = next(it)
        b = next(it)
        rest = list(it)
        return a * b + rest[0], next(it, x * 5)

    x = kiln.randn(3)
    assert _counts(fn, x) == (1, 0)
    _compiled_equals_eager(fn, (x,))
