"""The autograd engine: backward/grad, graph structure, in-place and views under autograd,
hooks, grad modes, custom Functions, the errors PyTorch gives. Values are checked against
PyTorch where it is installed; engine behaviour is checked on its own otherwise."""
import numpy as np
import pytest

import kiln

torch = pytest.importorskip("torch")


def pair(a, requires_grad=True, dtype=np.float64):
    a = np.asarray(a, dtype=dtype)
    k = kiln.from_numpy(a.copy()).requires_grad_(requires_grad)
    t = torch.from_numpy(a.copy()).requires_grad_(requires_grad)
    return k, t


def close(k, t, atol=1e-10):
    assert k is not None and t is not None
    np.testing.assert_allclose(k.detach().numpy(), t.detach().numpy(), atol=atol, rtol=1e-7)


def rand(*shape, seed=0):
    return np.random.default_rng(seed).standard_normal(shape)


def test_backward_accumulates_into_leaves():
    xk, xt = pair(rand(3, 4))
    wk, wt = pair(rand(4, 2, seed=1))
    for lib, x, w in ((kiln, xk, wk), (torch, xt, wt)):
        y = (x.tanh() @ w).sigmoid()
        loss = (y * y).sum() + x.exp().mean()
        loss.backward()
        loss2 = (x * 2).sum()
        loss2.backward()
    close(xk.grad, xt.grad)
    close(wk.grad, wt.grad)


def test_graph_structure():
    x = kiln.ones(2, requires_grad=True)
    y = x * 2
    z = y.sum()
    assert x.is_leaf and not y.is_leaf and y.requires_grad
    assert y.grad_fn.name() == "MulBackward0"
    assert z.grad_fn.name() == "SumBackward0"
    (nxt, nr), = z.grad_fn.next_functions
    assert nxt == y.grad_fn and nr == 0
    acc = y.grad_fn.next_functions[0][0]
    assert acc.name() == "AccumulateGrad" and acc.variable._is_same(x)
    assert x.grad_fn is None
    assert not (x.detach().requires_grad)
    assert (x + 1).int().requires_grad is False


def test_backward_twice_needs_retain_graph():
    x = kiln.ones(3, requires_grad=True)
    y = (x.exp() * x).sum()
    y.backward(retain_graph=True)
    y.backward()
    np.testing.assert_allclose(x.grad.numpy(), 2 * (np.e + np.e), rtol=1e-6)
    with pytest.raises(RuntimeError, match="backward through the graph a second time"):
        y.backward()


def test_saved_tensor_modified_inplace():
    x = kiln.ones(3, requires_grad=True)
    y = x * 2
    z = y.sin()
    y.add_(1)
    with pytest.raises(RuntimeError, match=r"modified by an inplace operation: \[torch.FloatTensor \[3\]\], "
                                           r"which is output 0 of Add, is at version 1; expected "
                                           r"version 0 instead"):
        z.sum().backward()
    z = x.sin() * 2
    with kiln.no_grad():
        x.mul_(2)
    with pytest.raises(RuntimeError, match=r"\[torch.FloatTensor \[3\]\] is at version 1; expected version 0"):
        z.sum().backward()


def test_nonscalar_backward_needs_gradient():
    x = kiln.ones(3, requires_grad=True)
    with pytest.raises(RuntimeError, match="grad can be implicitly created only for scalar outputs"):
        (x * 2).backward()
    (x * 2).backward(kiln.tensor([1.0, 2.0, 3.0]))
    assert x.grad.tolist() == [2.0, 4.0, 6.0]
    with pytest.raises(RuntimeError, match="Mismatch in shape"):
        (x * 2).backward(kiln.ones(2))


def test_inplace_on_leaf_raises():
    x = kiln.ones(3, requires_grad=True)
    with pytest.raises(RuntimeError, match="a leaf Variable that requires grad is being used in an in-place"):
        x.add_(1)
    with kiln.no_grad():
        x.add_(1)
    assert x.tolist() == [2.0, 2.0, 2.0]


def test_inplace_through_view_of_leaf_raises():
    # Regression: w[0] = 5 made the parameter w a non-leaf (its history rebased onto the write).
    w = kiln.ones(3, requires_grad=True)
    with pytest.raises(RuntimeError, match="a view of a leaf Variable that requires grad is being used"):
        w[0] = 5.0
    with pytest.raises(RuntimeError, match="a view of a leaf Variable that requires grad is being used"):
        w[1:].mul_(2)
    assert w.is_leaf and w.grad_fn is None
    with kiln.no_grad():
        w[0] = 5.0
    assert w.tolist() == [5.0, 1.0, 1.0] and w.is_leaf


def test_no_grad_at_all_raises():
    x = kiln.ones(3)
    with pytest.raises(RuntimeError, match="does not require grad and does not have a grad_fn"):
        x.sum().backward()


@pytest.mark.parametrize("case", ["nonleaf", "view", "view_of_plain_base", "slice_assign", "mask_assign"])
def test_inplace_and_views_match_torch(case):
    xk, xt = pair(rand(4, 3))
    wk, wt = pair(rand(3, seed=2))
    out = []
    for lib, x, w in ((kiln, xk, wk), (torch, xt, wt)):
        if case == "nonleaf":
            y = x * 2
            y.mul_(w)
            y.relu_()
            loss = (y * y).sum()
        elif case == "view":
            y = x.clone()
            y[1].mul_(w)
            y.t()[0].add_(3)
            loss = (y ** 2).sum()
        elif case == "view_of_plain_base":
            y = lib.zeros(4, 3, dtype=lib.float64)
            v = y[1:3]
            v.add_(x[:2] * w)
            loss = (y * y.sum()).sum()
        elif case == "slice_assign":
            y = lib.zeros(5, 3, dtype=lib.float64)
            y[1:] = x * w
            y[0] = w
            loss = (y.exp() * 0.5).sum()
        else:
            y = x.clone()
            y[x > 0] = 0.0
            loss = (y * w).sum()
        loss.backward()
        out.append((loss, y))
    close(out[0][0], out[1][0])
    close(out[0][1], out[1][1])
    close(xk.grad, xt.grad)
    close(wk.grad, wt.grad)


@pytest.mark.parametrize("make", [
    lambda x: x.unfold(0, 3, 2).unfold(1, 2, 1),
    lambda x: x.view(4, 5).unfold(0, 2, 1).unfold(1, 3, 2),
    lambda x: x.as_strided((6, 4), (2, 1)).as_strided((3, 3), (4, 1), 1),
    lambda x: x.expand(3, 20).unfold(1, 4, 3),
])
def test_overlapping_view_of_overlapping_view_grad_matches_torch(make):
    """An as_strided/unfold of a view whose own elements share memory: each element of the
    inner view gets its share of the location's gradient, so the location counts once (the
    gradient used to come out doubled where the inner view overlapped)."""
    k, t = pair(np.arange(20.0))
    ko, to = make(k), make(t)
    w = np.random.default_rng(0).standard_normal(tuple(to.shape))
    ko.backward(kiln.from_numpy(w))
    to.backward(torch.from_numpy(w))
    np.testing.assert_allclose(k.grad.numpy(), t.grad.numpy(), rtol=1e-12)


def test_view_of_modified_base_sees_new_history():
    xk, xt = pair(rand(3, 2))
    res = []
    for lib, x in ((kiln, xk), (torch, xt)):
        y = x * 1
        v = y[0]
        y.mul_(3)
        (v * v).sum().backward()
        res.append(x.grad)
    close(*res)


def test_hooks_and_retain_grad():
    x = kiln.tensor([1.0, 2.0], requires_grad=True)
    y = x * 3
    y.retain_grad()
    seen = []
    h = y.register_hook(lambda g: seen.append(g.tolist()) or g * 10)
    x.register_hook(lambda g: g + 1)
    (y * y).sum().backward()
    assert seen == [[6.0, 12.0]]
    assert y.grad.tolist() == [60.0, 120.0]     # retained after the hook, as PyTorch does
    assert x.grad.tolist() == [181.0, 361.0]
    h.remove()
    x.grad = None
    (x * 3 * 1).sum().backward()
    assert x.grad.tolist() == [4.0, 4.0]
    with pytest.raises(RuntimeError, match="doesn't require gradient"):
        kiln.ones(2).register_hook(lambda g: g)


def test_grad_and_double_backward():
    xk, xt = pair([0.5, -1.0, 2.0])
    res = []
    for lib, x in ((kiln, xk), (torch, xt)):
        y = (x ** 3).sum() + (x.sin() * x).sum()
        g, = lib.autograd.grad(y, x, create_graph=True)
        gg, = lib.autograd.grad(g.sum(), x)
        res.append((g, gg))
    close(res[0][0], res[1][0])
    close(res[0][1], res[1][1])
    assert xk.grad is None


def test_grad_allow_unused_and_inputs():
    a = kiln.ones(2, requires_grad=True)
    b = kiln.ones(2, requires_grad=True)
    y = (a * 2).sum()
    with pytest.raises(RuntimeError, match="appears to not have been used in the graph"):
        kiln.autograd.grad(y, [a, b], retain_graph=True)
    ga, gb = kiln.autograd.grad(y, [a, b], allow_unused=True, retain_graph=True)
    assert ga.tolist() == [2.0, 2.0] and gb is None
    ga, gb = kiln.autograd.grad(y, [a, b], materialize_grads=True, retain_graph=True)
    assert gb.tolist() == [0.0, 0.0]
    z = (a * b).sum()
    z.backward(inputs=[b])
    assert a.grad is None and b.grad.tolist() == [1.0, 1.0]


def test_grad_modes():
    x = kiln.ones(2, requires_grad=True)
    with kiln.no_grad():
        assert not (x * 2).requires_grad
        with kiln.enable_grad():
            assert (x * 2).requires_grad
    with kiln.set_grad_enabled(False):
        assert not (x * 2).requires_grad
    assert (x * 2).requires_grad
    with kiln.inference_mode():
        y = x * 2
        assert not y.requires_grad and y.is_inference()
    assert not x.is_inference()
    with pytest.raises(RuntimeError, match="Inference tensors cannot be saved for backward"):
        (x * y).sum()


def test_detach_and_requires_grad_rules():
    x = kiln.ones(2, requires_grad=True)
    y = x * 2
    with pytest.raises(RuntimeError, match="only change requires_grad flags of leaf variables"):
        y.requires_grad = False
    with pytest.raises(RuntimeError, match="only Tensors of floating point"):
        kiln.ones(2, dtype=kiln.int64).requires_grad_()
    d = y.detach()
    assert not d.requires_grad and d.is_leaf and d.data_ptr() == y.data_ptr()
    y.detach_()
    assert not y.requires_grad and y.is_leaf


def test_custom_function():
    class Cube(kiln.autograd.Function):
        @staticmethod
        def forward(ctx, x, k):
            ctx.save_for_backward(x)
            ctx.k = k
            return x ** 3 * k

        @staticmethod
        def backward(ctx, g):
            x, = ctx.saved_tensors
            assert ctx.needs_input_grad == (True, False)
            return g * 3 * x ** 2 * ctx.k, None

    x = kiln.tensor([1.0, 2.0], dtype=kiln.float64, requires_grad=True)
    y = Cube.apply(x, 2.0)
    assert y.grad_fn.name() == "CubeBackward"
    y.sum().backward()
    assert x.grad.tolist() == [6.0, 24.0]
    assert kiln.autograd.gradcheck(lambda t: Cube.apply(t, 1.5), (x,))
    g, = kiln.autograd.grad(Cube.apply(x, 1.0).sum(), x, create_graph=True)
    gg, = kiln.autograd.grad(g.sum(), x)
    assert gg.tolist() == [6.0, 12.0]

    class AddOneInplace(kiln.autograd.Function):
        @staticmethod
        def forward(ctx, x):
            x.add_(1)
            ctx.mark_dirty(x)
            return x

        @staticmethod
        @kiln.autograd.function.once_differentiable
        def backward(ctx, g):
            return g

    z = x * 1
    out = AddOneInplace.apply(z)
    assert out is z and z.grad_fn.name() == "AddOneInplaceBackward"

    class Bad(kiln.autograd.Function):
        @staticmethod
        def forward(ctx, a, b):
            return a * b

        @staticmethod
        def backward(ctx, g):
            return g

    with pytest.raises(RuntimeError, match="returned an incorrect number of gradients"):
        Bad.apply(x, x).sum().backward()


def test_gradcheck_catches_a_wrong_gradient():
    class Wrong(kiln.autograd.Function):
        @staticmethod
        def forward(ctx, x):
            return x * x

        @staticmethod
        def backward(ctx, g):
            return g

    x = kiln.tensor([1.0, 2.0], dtype=kiln.float64, requires_grad=True)
    with pytest.raises(RuntimeError, match="Jacobian mismatch"):
        kiln.autograd.gradcheck(Wrong.apply, (x,))
    assert kiln.autograd.gradcheck(Wrong.apply, (x,), raise_exception=False) is False


@pytest.mark.parametrize("fn", [
    lambda x: (x * x).sum(dim=1),
    lambda x: x.softmax(-1),
    lambda x: x.log_softmax(0),
    lambda x: kiln.nn.functional.layer_norm(x, (3,)) if isinstance(x, kiln.Tensor) else torch.nn.functional.layer_norm(x, (3,)),
    lambda x: x.var(1, keepdim=True),
    lambda x: x.std(),
    lambda x: x.amax(1),
    lambda x: x.max(0).values,
    lambda x: x.prod(1),
    lambda x: x.logsumexp(1),
    lambda x: x @ x.t(),
    lambda x: x.matmul(x[0]) + x[1].matmul(x.t()),
    lambda x: x.reshape(3, 2).permute(1, 0)[1:, ::2].expand(3, 1, 2),
    lambda x: x.cumsum(1) * x.flip(0),
    lambda x: x.pow(2).clamp(0.1, 1.0) + x.abs(),
    lambda x: x.norm(),
])
def test_gradgradcheck_families(fn):
    x, _ = pair(rand(2, 3, seed=3) + 0.1, dtype=np.float64)
    assert kiln.autograd.gradcheck(fn, (x,))
    assert kiln.autograd.gradgradcheck(fn, (x,))


def test_missing_derivative_is_named():
    x = kiln.ones(3, requires_grad=True)
    y = kiln.nan_to_num(x)  # has a formula
    y.sum().backward()
    import subprocess
    import sys
    out = subprocess.run([sys.executable, "tools/kiln_ops.py", "--missing-derivatives"], capture_output=True,
                         text=True, cwd=__file__.rsplit("/test/", 1)[0])
    assert out.returncode == 0 and "differentiable ops without a derivative formula" in out.stdout
