"""AOT autograd (kiln/compiler/aot.py): a graph that needs autograd compiles into a forward and a
backward program run by one CompiledFunctionBackward node; gradients equal eager kiln's."""
import os
import shutil

import numpy as np
import pytest

import kiln
import kiln.nn as nn

pytestmark = pytest.mark.skipif(shutil.which(os.environ.get("KILN_CXX", "c++")) is None,
                                reason="no C++ compiler")


@pytest.fixture(autouse=True)
def setup(monkeypatch, tmp_path_factory):
    path = str(tmp_path_factory.getbasetemp() / "aot-cache")
    monkeypatch.setattr(kiln.config, "cache_dir", path)
    monkeypatch.setenv("KILN_CACHE_DIR", path)
    monkeypatch.setattr(kiln.config, "strict", True)
    kiln.compiler.reset()


def _rand(*shape, seed=0, requires_grad=False):
    t = kiln.from_numpy(np.random.default_rng(seed).standard_normal(shape).astype(np.float32))
    return t.requires_grad_() if requires_grad else t


def _close(a, b, tol=1e-5):
    np.testing.assert_allclose(a.detach().numpy(), b.detach().numpy(), rtol=tol, atol=tol)


def _mlp():
    kiln.manual_seed(0)
    return nn.Sequential(nn.Linear(6, 16), nn.GELU(), nn.LayerNorm(16), nn.Linear(16, 3))


@pytest.mark.parametrize("backend", ["inductor", "aot_eager"])
def test_gradients_equal_eager(backend):
    eager, compiled = _mlp(), _mlp()
    x, xc = _rand(5, 6, requires_grad=True), _rand(5, 6, requires_grad=True)
    target = _rand(5, 3, seed=1)
    step = kiln.compile(lambda m, x: ((m(x) - target) ** 2).mean(), backend=backend)
    want = ((eager(x) - target) ** 2).mean()
    got = step(compiled, xc)
    assert got.grad_fn.name() == "CompiledFunctionBackward"
    want.backward()
    got.backward()
    _close(got, want)
    _close(xc.grad, x.grad)
    for (name, p), q in zip(eager.named_parameters(), compiled.parameters()):
        assert q.grad is not None, name
        _close(q.grad, p.grad)


def test_outputs_without_gradient_and_unused_outputs():
    def fn(x, w):
        h = (x @ w).tanh()
        return h.sum(), h.detach() * 2, h.argmax(dim=1), h * 3

    x, w = _rand(4, 3), _rand(3, 5, seed=1, requires_grad=True)
    w_eager = w.detach().clone().requires_grad_()
    loss, detached, indices, scaled = kiln.compile(fn)(x, w)
    assert loss.requires_grad and scaled.requires_grad
    assert not detached.requires_grad and not indices.requires_grad
    loss.backward()  # `scaled` gets no gradient: the backward gets zeros for it
    want = fn(x, w_eager)
    want[0].backward()
    _close(w.grad, w_eager.grad)
    _close(detached, want[1])
    assert indices.tolist() == want[2].tolist()


def test_write_into_an_intermediate():
    """The backward of a write through a view reads the gradient through as_strided (the
    inductor functionalizes it into index_put, test_inductor.py): aot_eager here."""
    def fn(x):
        h = x * 2
        h[0] = 0
        return (h * h).sum()

    x, x_eager = _rand(3, 4, requires_grad=True), _rand(3, 4, requires_grad=True)
    kiln.compile(fn, backend="aot_eager")(x).backward()
    fn(x_eager).backward()
    _close(x.grad, x_eager.grad)
    assert float(x.grad[0].abs().sum()) == 0.0


def test_double_backward_raises():
    x = _rand(3, requires_grad=True)
    out = kiln.compile(lambda x: (x.sin() * x).sum())(x)
    with pytest.raises(RuntimeError, match="create_graph=True through a compiled region"):
        kiln.autograd.grad(out, x, create_graph=True)


def test_dropout_draws_as_eager():
    """Random ops of a compiled training graph draw from the generator as eagerly (same seed,
    same masks), and the backward uses the forward's mask."""
    def make():
        kiln.manual_seed(3)
        return nn.Sequential(nn.Linear(8, 8), nn.Dropout(0.5), nn.Linear(8, 2))

    eager, compiled = make(), make()
    x = _rand(16, 8)
    compiled_model = kiln.compile(compiled)
    for _ in range(2):
        kiln.manual_seed(7)
        want = eager(x).square().sum()
        kiln.manual_seed(7)
        got = compiled_model(x).square().sum()
        _close(got, want)
        want.backward()
        got.backward()
        for p, q in zip(eager.parameters(), compiled.parameters()):
            _close(q.grad, p.grad)


def test_eval_and_train_compile_apart():
    model = _mlp()
    compiled = kiln.compile(model)
    x = _rand(2, 6)
    with kiln.no_grad():
        inference = compiled(x)
    assert inference.grad_fn is None
    training = compiled(x)
    assert training.grad_fn.name() == "CompiledFunctionBackward"
    _close(training, inference)


def test_debug_dir_has_the_joint_forward_and_backward_graphs(tmp_path, monkeypatch):
    monkeypatch.setattr(kiln.config, "debug_dir", str(tmp_path))
    x = _rand(3, requires_grad=True)
    kiln.compile(lambda x: (x.exp() * 2).sum())(x).backward()
    files = {f for _, _, names in os.walk(tmp_path) for f in names}
    assert {"joint.txt", "forward.txt", "backward.txt", "forward_output_code.cpp",
            "backward_output_code.cpp"} <= files
    backward = next(os.path.join(d, "backward.txt") for d, _, names in os.walk(tmp_path)
                    if "backward.txt" in names)
    assert "tangents_1" in open(backward).read()


def _saved(partitioner):
    """(tensors, bytes) the backward of a Linear-GELU-Linear block receives."""
    from kiln.compiler import aot

    kiln.manual_seed(0)
    m = nn.Sequential(nn.Linear(8, 32), nn.GELU(), nn.Linear(32, 8))
    captured = []
    kiln.compile(lambda x: m(x).sum(), backend=lambda gm, ex: captured.append((gm, ex)) or gm.forward)(_rand(16, 8))
    gm, examples = captured[0]
    attrs = {n.target: _attr(gm, n.target) for n in gm.graph.nodes if n.op == "get_attr"}
    _, _, part = aot.plan_training(gm, examples, attrs, partitioner)
    return len(part.saved_inputs) + part.num_saved, part.saved_bytes


def _attr(gm, path):
    for atom in path.split("."):
        gm = getattr(gm, atom)
    return gm


def test_explain_reports_training_kernels_and_saved_bytes():
    kiln.manual_seed(0)
    m = nn.Sequential(nn.Linear(8, 32), nn.GELU(), nn.Linear(32, 8))
    out = kiln.explain(lambda x: m(x).sum())(_rand(16, 8))
    plan = out.kernels_per_graph[0]
    assert plan.partitioner == "min_cut" and plan.forward.num_kernels >= 1 and plan.backward.num_kernels >= 1
    assert (plan.saved_tensors, plan.saved_bytes) == _saved("min_cut")
    assert "saved for backward:" in str(out) and "backward kernels:" in str(out)


def test_min_cut_saves_less_than_the_default_partitioner():
    """The default saves the GELU's output path values; min-cut saves the matmul's output and
    recomputes the GELU's derivative from it."""
    tensors_min, bytes_min = _saved("min_cut")
    tensors_default, bytes_default = _saved("default")
    assert bytes_min < bytes_default and tensors_min <= tensors_default


@pytest.mark.parametrize("partitioner", ["default", "min_cut"])
def test_both_partitioners_give_eager_gradients(partitioner):
    eager, compiled = _mlp(), _mlp()
    x = _rand(5, 6)
    want = eager(x).tanh().sum()
    got = kiln.compile(lambda x: compiled(x).tanh().sum(), options={"partitioner": partitioner})(x)
    want.backward()
    got.backward()
    for p, q in zip(eager.parameters(), compiled.parameters()):
        _close(q.grad, p.grad)


def test_unknown_partitioner_is_an_error():
    model = _mlp()
    with pytest.raises(Exception, match="unknown partitioner 'fastest'"):
        kiln.compile(model, options={"partitioner": "fastest"})(_rand(2, 6))


def test_autograd_grad_inside_a_compiled_function():
    """kiln.autograd.grad in the traced code is a graph break (as with torch.compile): it runs
    eagerly through the first graph's backward; its results do not require grad, as eagerly."""
    def fn(a, b):
        y = (a.tanh() @ b).sigmoid()
        loss = (y * y).sum() + a.exp().mean()
        ga, gb = kiln.autograd.grad(loss, [a, b])
        return loss.detach(), ga, gb

    a, b = _rand(8, 16, requires_grad=True), _rand(16, 4, seed=1, requires_grad=True)
    got, want = kiln.compile(fn)(a, b), fn(a, b)
    assert [t.requires_grad for t in got] == [t.requires_grad for t in want] == [False] * 3
    for g, w in zip(got, want):
        _close(g, w)


def _compiled_and_eager(fn, make_args, backend="inductor"):
    """fn compiled and eagerly on fresh copies of the same arguments: (result, args) each."""
    got_args, want_args = make_args(), make_args()
    got = kiln.compile(fn, backend=backend)(*got_args)
    want = fn(*want_args)
    return (got, got_args), (want, want_args)


@pytest.mark.parametrize("backend", ["inductor", "aot_eager"])
def test_write_into_an_argument_compiles_for_training(backend):
    """x.add_(1) on an argument: functionalized (an add, then one copy_ back into x at the end
    of the forward), so the graph compiles for training instead of running op by op; the
    caller sees x written as eagerly."""
    def fn(x, w):
        x.add_(1)
        return (x.tanh() * w).sum()

    def args():
        return _rand(3, 4), _rand(3, 4, seed=1, requires_grad=True)

    (got, (x, w)), (want, (xe, we)) = _compiled_and_eager(fn, args, backend)
    assert got.grad_fn.name() == "CompiledFunctionBackward"
    got.backward()
    want.backward()
    _close(got, want)
    _close(x, xe)
    _close(w.grad, we.grad)


def test_write_through_a_view_of_an_intermediate_compiles_with_the_inductor():
    """h[0] = 0 becomes a select_scatter: its backward needs no as_strided, so the inductor
    compiles it (it used to need aot_eager)."""
    def fn(x):
        h = x * 2
        h[0] = 0
        h[:, 1:3] *= 3
        return (h * h).sum()

    (got, (x,)), (want, (xe,)) = _compiled_and_eager(fn, lambda: (_rand(3, 4, requires_grad=True),))
    assert got.grad_fn.name() == "CompiledFunctionBackward"
    got.backward()
    want.backward()
    _close(got, want)
    _close(x.grad, xe.grad)


def test_write_through_a_transposed_view_keeps_the_base_contiguous():
    """A write through h.t()[0] rebuilds h as t(select_scatter(t(h), ...)), transposed strides:
    the base is made contiguous again, so a later h.view(-1) traces (it raised "view size is
    not compatible" and the frame fell back to eager, an error in strict mode)."""
    def fn(w):
        h = w * 1
        h.t()[0].sub_(1)
        return (h.view(-1) * kiln.arange(12.0)).sum()

    (got, (w,)), (want, (we,)) = _compiled_and_eager(fn, lambda: (_rand(3, 4, requires_grad=True),))
    assert got.grad_fn.name() == "CompiledFunctionBackward"
    got.backward()
    want.backward()
    _close(got, want)
    _close(w.grad, we.grad)


def test_output_view_of_a_saved_product():
    """A training forward returning h.view(5, 2, 12) and saving h (for h * h) outputs one
    buffer twice: it used to take the view's shape for both, and the backward got the saved h
    as [5, 2, 12] ("compiled for float32[10, 12]")."""
    def fn(x, w):
        h = x @ w
        return h.view(5, 2, 12), (h * h).sum(), h.t()

    (got, args), (want, args_eager) = _compiled_and_eager(
        fn, lambda: (_rand(10, 8, requires_grad=True), _rand(8, 12, requires_grad=True)))
    assert got[0].grad_fn.name() == "CompiledFunctionBackward"
    assert got[0].shape == (5, 2, 12) and got[2].shape == (12, 10)
    (got[0].sum() + got[1] + (got[2] * 2).sum()).backward()
    (want[0].sum() + want[1] + (want[2] * 2).sum()).backward()
    for g, w in zip(got, want):
        _close(g, w)
    for a, b in zip(args, args_eager):
        _close(a.grad, b.grad)


def test_in_place_update_of_a_buffer_under_no_grad():
    """A running average kept in an argument, updated in place under no_grad (as batch norm's
    running statistics): the forward writes it back; gradients are untouched by it."""
    def fn(x, w, avg):
        y = x @ w
        with kiln.no_grad():
            avg.mul_(0.9).add_(y.mean(0), alpha=0.1)
        return y.relu().sum()

    def args():
        return _rand(5, 3), _rand(3, 4, seed=1, requires_grad=True), _rand(4, seed=2)

    (got, (_, w, avg)), (want, (_, we, avg_e)) = _compiled_and_eager(fn, args)
    assert got.grad_fn.name() == "CompiledFunctionBackward"
    got.backward()
    want.backward()
    _close(avg, avg_e)
    _close(w.grad, we.grad)
    assert not avg.requires_grad


def test_batch_norm_running_statistics_in_a_compiled_training_step():
    def make():
        kiln.manual_seed(0)
        return nn.Sequential(nn.Linear(4, 6), nn.BatchNorm1d(6), nn.ReLU(), nn.Linear(6, 1))

    eager, compiled = make(), make()
    step = kiln.compile(lambda m, x: m(x).square().mean())
    for seed in range(2):
        x = _rand(8, 4, seed=seed)
        got, want = step(compiled, x), eager(x).square().mean()
        assert got.grad_fn.name() == "CompiledFunctionBackward"
        got.backward()
        want.backward()
        _close(got, want)
    bn, bn_eager = compiled[1], eager[1]
    _close(bn.running_mean, bn_eager.running_mean)
    _close(bn.running_var, bn_eager.running_var)
    assert int(bn.num_batches_tracked) == int(bn_eager.num_batches_tracked) == 2
    for p, q in zip(eager.parameters(), compiled.parameters()):
        _close(q.grad, p.grad)


@pytest.mark.parametrize("partitioner", ["default", "min_cut"])
def test_write_into_an_argument_that_requires_grad(partitioner):
    """The new value of an input that requires grad is an extra output of the compiled graph,
    copied into the input by the runtime wrapper under autograd (as PyTorch's wrapper does), so
    the input's history goes through the compiled node as it goes through mul_ eagerly. (Through
    kiln.compile the capture refuses the write first: its fake of a non-leaf input is a leaf.)"""
    from kiln.compiler import aot
    from kiln.fx import GraphModule

    gm = GraphModule({}, kiln.fx.parse("""graph @fn(%h: f32[3]) {
  %m = call_function aten.mul_.Scalar(%h, 2)
  %sq = call_function aten.mul.Tensor(%h, %h)
  %s = call_function aten.sum(%sq)
  output (%s,)
}"""))
    a, a_eager = _rand(3, requires_grad=True), _rand(3, requires_grad=True)
    h, h_eager = a * 1, a_eager * 1
    run, _ = aot.compile_training(gm, [h], {}, lambda g: kiln.fx.retrace(g, "prims").forward, partitioner)
    (got,) = run(h)
    h_eager.mul_(2)
    want = (h_eager * h_eager).sum()
    assert got.grad_fn.name() == "CompiledFunctionBackward"
    _close(got, want)
    _close(h, h_eager)
    (got + h.sum()).backward()
    (want + h_eager.sum()).backward()
    _close(a.grad, a_eager.grad)


def test_write_into_a_parameter_under_no_grad():
    """A parameter scaled in place under no_grad inside a training graph (weight clipping): the
    wrapper writes it under no_grad, and the backward reads its value from before the write."""
    def fn(x, w):
        y = (x * w).tanh().sum()
        with kiln.no_grad():
            w.mul_(0.5)
        return y

    def args():
        return _rand(4), _rand(4, seed=1, requires_grad=True)

    (got, (_, w)), (want, (_, w_eager)) = _compiled_and_eager(fn, args)
    assert got.grad_fn.name() == "CompiledFunctionBackward"
    _close(w, w_eager)
    assert w.is_leaf and w.requires_grad
    got.backward()
    want.backward()
    _close(w.grad, w_eager.grad)


def test_writes_through_reshape_follow_its_aliasing():
    """reshape is a view of a contiguous tensor and a copy of a transposed one: functionalization
    sees which (the composite is decomposed before it runs), so only the first write reaches h."""
    def fn(x, w):
        h = x * 1
        h.reshape(-1)[0:2].add_(1)
        g = h.t().reshape(-1)
        g.add_(5)
        return (h * w).sum() + g.sum()

    def args():
        return _rand(3, 4), _rand(3, 4, seed=1, requires_grad=True)

    (got, (_, w)), (want, (_, w_eager)) = _compiled_and_eager(fn, args)
    assert got.grad_fn.name() == "CompiledFunctionBackward"
    _close(got, want)
    got.backward()
    want.backward()
    _close(w.grad, w_eager.grad)


@pytest.mark.parametrize("reduce", ["sum", "mean"])
def test_backward_of_a_sum_of_the_compiled_output(reduce):
    # Regression: the gradient of sum()/mean() reaches the compiled backward expanded from a
    # scalar (strides 0) while the backward was compiled for contiguous tangents: it raised
    # "input 2 (%tangents_1) is float32[2, 3] with strides [0, 0]".
    grads = []
    for compiled in (False, True):
        model = _mlp()
        fn = kiln.compile(model) if compiled else model
        getattr(fn(_rand(5, 6, seed=1)), reduce)().backward()
        grads.append([p.grad for p in model.parameters()])
    for g, want in zip(grads[1], grads[0]):
        _close(g, want)


def test_cnn_with_max_pool_compiles_forward_and_backward():
    # max_pool2d and its backward lower into the loop IR (the convolutions run eagerly between
    # compiled segments); the pool's (values, indices) stay in one segment.
    def model():
        kiln.manual_seed(0)
        return nn.Sequential(nn.Conv2d(3, 4, 3, padding=1), nn.ReLU(), nn.MaxPool2d(2),
                             nn.Conv2d(4, 4, 3), nn.ReLU(), nn.MaxPool2d(3, 2, 1), nn.Flatten(),
                             nn.Linear(16, 3))
    grads = []
    for compiled in (False, True):
        m = model()
        fn = kiln.compile(m) if compiled else m
        (fn(_rand(2, 3, 10, 10, seed=2)) ** 2).sum().backward()
        grads.append([p.grad for p in m.parameters()])
    for g, want in zip(grads[1], grads[0]):
        _close(g, want)


def test_weight_gradient_of_a_batched_linear_is_one_mm():
    """A linear layer without bias on [batch, seq, features] is matmul(x, w.t()), which folds
    the batch into the rows of one mm; its weight gradient folds them too, as torch.matmul's
    does (before: a bmm per batch entry, then a sum over the batch)."""
    kiln.manual_seed(0)
    lin = nn.Linear(8, 6, bias=False)
    x = _rand(4, 5, 8)
    out = kiln.explain(lambda x: lin(x).square().sum())(x)
    backward = out.kernels_per_graph[0].backward
    assert [kind for _, kind in backward.externs] == ["mm"], backward.externs  # x needs no grad
    want = kiln.autograd.grad(lin(x).square().sum(), lin.weight)[0]
    torch = pytest.importorskip("torch")
    tw = torch.from_numpy(lin.weight.detach().numpy().copy()).requires_grad_()
    torch.nn.functional.linear(torch.from_numpy(x.numpy()), tw).square().sum().backward()
    # The same single product; the GEMM libraries' blocking differs by CPU (1 ulp on AVX2).
    np.testing.assert_allclose(want.numpy(), tw.grad.numpy(), rtol=1e-6, atol=1e-6)


def test_split_backward_is_one_tensor_written_in_slices():
    """The gradient of a split (a linear layer's q, k, v) is one zero-filled tensor written in
    each part's slice (passes/MergeSliceWrites.h), not a zeros per part summed; gradients equal
    eager's."""
    from kiln.compiler import aot

    kiln.manual_seed(0)
    lin = nn.Linear(4, 12)

    def fn(x):
        q, k, v = lin(x).split(4, dim=-1)
        return ((q * k).tanh() + v.sigmoid()).sum()

    x = _rand(3, 5, 4)
    captured = []
    kiln.compile(fn, backend=lambda gm, ex: captured.append((gm, ex)) or gm.forward)(x)
    gm, examples = captured[0]
    attrs = {n.target: _attr(gm, n.target) for n in gm.graph.nodes if n.op == "get_attr"}
    _, _, part = aot.plan_training(gm, examples, attrs, "min_cut")
    text = str(part.backward)
    assert text.count("aten.zeros(") == 1 and text.count("aten.copy_(") == 3, text
    want = kiln.autograd.grad(fn(x), [lin.weight, lin.bias])
    got = kiln.autograd.grad(kiln.compile(fn)(x), [lin.weight, lin.bias])
    for g, w in zip(got, want):
        _close(g, w)
