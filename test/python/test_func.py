"""kiln.func (torch.func) against torch.func: functional_call, grad/grad_and_value (nested, with
closed-over parameters), vjp, jvp, jacrev, jacfwd, hessian, vmap (in_dims/out_dims, pytrees,
composed with grad); values, shapes and requires_grad of the results."""
import numpy as np
import pytest

import kiln

torch = pytest.importorskip("torch")

r = np.random.default_rng(0)
X = r.standard_normal((3, 4)).astype(np.float32)
W = r.standard_normal((5, 4)).astype(np.float32)


def _leaves(x):
    if isinstance(x, dict):
        return [v for k in sorted(x) for v in _leaves(x[k])]
    if isinstance(x, (list, tuple)):
        return [v for item in x for v in _leaves(item)]
    return [x]


def check(build, tol=1e-5):
    got, want = _leaves(build(kiln)), _leaves(build(torch))
    assert len(got) == len(want)
    for a, b in zip(got, want):
        assert tuple(a.shape) == tuple(b.shape)
        assert a.requires_grad == b.requires_grad
        np.testing.assert_allclose(a.detach().numpy(), b.detach().numpy(), rtol=tol, atol=tol)


def test_grad_nested_and_argnums():
    check(lambda T: T.func.grad(lambda x: (x.sin() * x).sum())(T.from_numpy(X)))
    check(lambda T: T.func.grad(lambda y: T.func.grad(lambda x: (x ** 3).sum())(y).sum())(T.from_numpy(X)))
    check(lambda T: T.func.grad(lambda a, b: (a @ b.T).tanh().sum(), argnums=(0, 1))(T.from_numpy(X),
                                                                                    T.from_numpy(W)))
    check(lambda T: T.func.grad_and_value(lambda x: ((x * 2).sum(), x.mean()), has_aux=True)(T.from_numpy(X)))


def test_grad_of_a_closed_over_parameter_stays_differentiable():
    """MAML's inner step: the gradient depends on a parameter the function closes over, and the
    outer backward reaches it (torch: requires_grad True); with nothing outside, plain tensors."""
    def build(T):
        T.manual_seed(0)
        w = T.randn(4, requires_grad=True)
        x = T.from_numpy(X)
        g = T.func.grad(lambda v: ((x @ (w * v)) ** 2).sum())(T.ones(4))
        g.sum().backward()
        return [g, w.grad]
    check(build)


def test_functional_call_with_tied_weights_and_strict():
    def build(T):
        T.manual_seed(0)
        m = T.nn.Sequential(T.nn.Linear(4, 4), T.nn.Tanh(), T.nn.Linear(4, 4))
        m[2].weight = m[0].weight  # tied: replacing one name replaces both
        params = {k: v.detach() * 2 for k, v in m.named_parameters()}
        x = T.from_numpy(X)
        out = T.func.functional_call(m, params, (x,))
        grads = T.func.grad(lambda p: T.func.functional_call(m, p, x).pow(2).sum())(params)
        return [out, grads, m(x)]
    check(build)
    m = kiln.nn.Linear(2, 2)
    with pytest.raises(RuntimeError, match="Missing key"):
        kiln.func.functional_call(m, {"weight": kiln.zeros(2, 2)}, (kiln.ones(2),), strict=True)
    with pytest.raises(ValueError, match="multiple dictionaries"):
        kiln.func.functional_call(m, ({"weight": kiln.zeros(2, 2)}, {"weight": kiln.ones(2, 2)}), kiln.ones(2))


def test_vjp_jvp_jacobians_hessian():
    w = lambda T: T.from_numpy(W)  # noqa: E731

    def vjp(T):
        out, fn = T.func.vjp(lambda x: x.exp() * 2, T.from_numpy(X))
        return [out, fn(T.ones(3, 4))]
    check(vjp)
    check(lambda T: T.func.jvp(lambda x: (x.exp() * x).sum(-1), (T.from_numpy(X),), (T.ones(3, 4),)))
    check(lambda T: T.func.jacrev(lambda x: x.sin() @ w(T).T)(T.from_numpy(X)))
    check(lambda T: T.func.jacfwd(lambda x: x.sin() @ w(T).T)(T.from_numpy(X)))
    check(lambda T: T.func.jacrev(lambda a, b: a @ b.T, argnums=(0, 1))(T.from_numpy(X), w(T)))
    check(lambda T: T.func.hessian(lambda x: (x.sin() * x).sum())(T.from_numpy(X[0])))


def test_vmap_dims_pytrees_and_composition():
    w = lambda T: T.from_numpy(W)  # noqa: E731
    check(lambda T: T.vmap(lambda a, b: a @ b.T, in_dims=(0, None))(T.from_numpy(X), w(T)))
    check(lambda T: T.vmap(lambda a: a.sum(0), in_dims=1, out_dims=0)(T.from_numpy(X)))
    check(lambda T: T.vmap(lambda a: (a * 2, a.sum()), out_dims=(1, 0))(T.from_numpy(X)))
    check(lambda T: T.vmap(lambda d: d["a"] + d["b"], in_dims=({"a": 0, "b": None},))(
        {"a": T.from_numpy(X), "b": T.ones(4)}))
    # per-sample gradients, the common use
    check(lambda T: T.vmap(T.func.grad(lambda wt, x: ((x @ wt.T) ** 2).sum()), in_dims=(None, 0))(
        w(T), T.from_numpy(X)))
    with pytest.raises(ValueError, match="same size in the mapped dimension"):
        kiln.vmap(lambda a, b: a + b)(kiln.ones(2, 3), kiln.ones(3, 3))
    with pytest.raises(ValueError, match="must only return Tensors"):
        kiln.vmap(lambda a: 1.0)(kiln.ones(2))


def test_vmap_randomness_same_repeats_the_draw():
    out = kiln.vmap(lambda a: a + kiln.rand(3), randomness="same")(kiln.zeros(4, 3))
    assert all(out[i].tolist() == out[0].tolist() for i in range(4))


def test_autograd_functional():
    """torch.autograd.functional: vjp, jvp, vhp, hvp, jacobian (tensor and tuple in/out),
    hessian; create_graph keeps the results differentiable."""
    AF = lambda T: T.autograd.functional  # noqa: E731
    x = lambda T: T.from_numpy(X)  # noqa: E731
    w = lambda T: T.from_numpy(W)  # noqa: E731
    check(lambda T: AF(T).vjp(lambda a: a.exp() * 2, x(T), T.ones(3, 4)))
    check(lambda T: AF(T).jvp(lambda a: (a.sin() * a).sum(1), x(T), T.ones(3, 4)))
    check(lambda T: AF(T).jacobian(lambda a: a.sin() @ w(T).T, x(T)))
    check(lambda T: AF(T).jacobian(lambda a, b: (a @ b.T, a.sum()), (x(T), w(T))))
    check(lambda T: AF(T).hessian(lambda a: (a.sin() * a).sum(), x(T)[0]))
    check(lambda T: AF(T).vhp(lambda a: (a ** 3).sum(), x(T), T.ones(3, 4)))
    check(lambda T: AF(T).hvp(lambda a: (a ** 3).sum(), x(T), T.ones(3, 4)))

    def create_graph(T):
        a = x(T).requires_grad_()
        j = AF(T).jacobian(lambda b: (b ** 2).sum(1), a, create_graph=True)
        j.sum().backward()
        return [j, a.grad]
    check(create_graph)
