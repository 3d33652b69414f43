"""Small end-to-end cases from the conformance sweep: each compiles with no graph break where
torch.compile has none, and gives eager's answer."""
import decimal

import numpy as np
import pytest

import kiln
from kiln import nn


def _explain(fn, *args):
    kiln.compiler.reset()
    return kiln.explain(fn)(*args)


def test_module_hooks_are_traced_without_a_break():
    model = nn.Sequential(nn.Linear(4, 4), nn.ReLU(), nn.Linear(4, 2))
    model[0].register_forward_pre_hook(lambda m, args: (args[0] * 2,))
    model[2].register_forward_hook(lambda m, args, out: out + 1)
    x = kiln.randn(3, 4)
    want = model(x)
    e = _explain(model, x)
    assert (e.graph_count, len(e.break_reasons)) == (1, 0), e.break_reasons
    kiln.compiler.reset()
    got = kiln.compile(model)(x)
    np.testing.assert_allclose(got.detach().numpy(), want.detach().numpy(), rtol=1e-5, atol=1e-6)


class _Hooked(nn.Module):
    def __init__(self):
        super().__init__()
        self.lin = nn.Linear(3, 3)

    def forward(self, x):
        return self.lin(x).sum()


def test_adding_and_removing_a_hook_after_compiling_retraces():
    m = _Hooked()
    x = kiln.ones(2, 3)
    kiln.compiler.reset()
    f = kiln.compile(m)
    base = f(x).item()
    h = m.lin.register_forward_hook(lambda mod, args, out: out * 0)
    assert f(x).item() == 0.0  # a hook added later is seen (guarded), not the stale graph
    h.remove()
    assert abs(f(x).item() - base) < 1e-6


def test_hook_registered_with_kwargs_still_runs_right():
    m = _Hooked()
    m.lin.register_forward_pre_hook(lambda mod, args, kwargs: ((args[0] + 1,), kwargs), with_kwargs=True)
    x = kiln.ones(2, 3)
    want = m(x).item()
    kiln.compiler.reset()
    assert abs(kiln.compile(m)(x).item() - want) < 1e-5


class _Counter(nn.Module):
    def __init__(self):
        super().__init__()
        self.register_buffer("count", kiln.zeros((), dtype=kiln.int64))
        self.register_buffer("mean", kiln.zeros(3))

    def forward(self, x):
        with kiln.no_grad():
            self.count += 1          # in-place, then Python stores the same buffer back
            self.mean.mul_(0.5).add_(x.mean(0))
        return x - self.mean


def test_augmented_assignment_to_a_buffer_does_not_break():
    x = kiln.ones(2, 3)
    e = _explain(_Counter(), x)
    assert (e.graph_count, len(e.break_reasons)) == (1, 0), e.break_reasons
    m = _Counter()
    kiln.compiler.reset()
    f = kiln.compile(m)
    for _ in range(3):
        out = f(x).detach()
    assert m.count.item() == 3
    np.testing.assert_allclose(m.mean.numpy(), np.full(3, 1.75), rtol=1e-6)
    np.testing.assert_allclose(out.numpy(), np.full((2, 3), -0.75), rtol=1e-6)


def test_assigning_a_new_tensor_to_a_buffer_still_breaks():
    class M(nn.Module):
        def __init__(self):
            super().__init__()
            self.register_buffer("b", kiln.zeros(2))

        def forward(self, x):
            self.b = x * 2      # a different tensor: not the no-op store
            return x + 1

    m = M()
    x = kiln.ones(2)
    kiln.compiler.reset()
    out = kiln.compile(m)(x)
    np.testing.assert_allclose(out.detach().numpy(), [2.0, 2.0])
    np.testing.assert_allclose(m.b.numpy(), [2.0, 2.0])


def _assign(x, idx):
    y = x.clone()
    y[idx] = 0.0
    z = x.clone()
    z[x > 0] = -1.0
    w = x.clone()
    w[x[:, 0] > 0] = 5
    return y, z, w


def test_scalar_assignment_through_tensor_and_mask_indices_does_not_break():
    x = kiln.randn(5, 4)
    idx = kiln.tensor([0, 3])
    e = _explain(_assign, x, idx)
    assert (e.graph_count, len(e.break_reasons)) == (1, 0), e.break_reasons
    kiln.compiler.reset()
    got = kiln.compile(_assign)(x, idx)
    a = x.numpy()
    y, z, w = a.copy(), a.copy(), a.copy()
    y[[0, 3]] = 0.0
    z[a > 0] = -1.0
    w[a[:, 0] > 0] = 5
    for g, want in zip(got, (y, z, w)):
        np.testing.assert_allclose(g.detach().numpy(), want)


def test_mask_assignment_eager_matches_numpy():
    a = np.arange(12, dtype=np.float32).reshape(3, 4)
    x = kiln.from_numpy(a.copy())
    x[x > 5] = kiln.tensor(-2.0)                      # a 0-d tensor of the same dtype
    x[kiln.tensor([True, False, True])] = 7           # a mask over the leading dim
    want = a.copy()
    want[want > 5] = -2.0
    want[[True, False, True]] = 7
    np.testing.assert_array_equal(x.numpy(), want)
    i = kiln.arange(6)
    i[i % 2 == 0] = 9                                 # int64 self, int value
    assert i.tolist() == [9, 1, 9, 3, 9, 5]


_INDEX = [0, 2]


def test_python_list_indices_stay_in_the_graph():
    # Regression: `x[:, [0, 2, 4]]` made a real index tensor inside kiln's indexing binding,
    # which the tracer refused: the whole frame ran eagerly (torch.compile: one graph).
    def fn(x):
        y = x[:, [0, 2, 4]] * 2
        z = x[[1, 0]] * 3
        w = x[:, [[0, 1], [2, 3]]].sum(-1)
        x[:, [1, 3]] = -1.0
        return y, z, w, x * 1

    a = np.arange(10, dtype=np.float32).reshape(2, 5)
    e = _explain(fn, kiln.from_numpy(a.copy()))
    assert (e.graph_count, len(e.break_reasons)) == (1, 0), e.break_reasons
    kiln.compiler.reset()
    got = kiln.compile(fn)(kiln.from_numpy(a.copy()))
    want = fn(kiln.from_numpy(a.copy()))
    for g, w in zip(got, want):
        np.testing.assert_array_equal(g.numpy(), w.numpy())


def test_a_global_list_index_is_guarded():
    kiln.compiler.reset()
    fn = kiln.compile(lambda x: x[:, _INDEX] * 2)
    x = kiln.arange(6.0).reshape(2, 3)
    assert fn(x).tolist() == [[0.0, 4.0], [6.0, 10.0]]
    _INDEX[1] = 1
    try:
        assert fn(x).tolist() == [[0.0, 2.0], [6.0, 8.0]]
    finally:
        _INDEX[1] = 2


def test_module_built_inside_a_compiled_function():
    # nn.Parameter's __init__ was traced with `self` not yet a tensor: a segfault.
    def f(x):
        lin = nn.Linear(3, 4)
        w = nn.Parameter(x * 2)
        return lin(x).shape, w

    kiln.compiler.reset()
    shape, w = kiln.compile(f)(kiln.ones(2, 3))
    assert tuple(shape) == (2, 4) and isinstance(w, nn.Parameter) and w.requires_grad
    np.testing.assert_array_equal(w.detach().numpy(), np.full((2, 3), 2, np.float32))


def test_training_graph_returns_an_input_as_itself():
    # `return lin(x), w` compiled for training handed back a new Tensor aliasing w: not w, no
    # longer an nn.Parameter nor a leaf.
    lin = nn.Linear(3, 4)

    def f(x, w):
        return lin(x), w

    kiln.compiler.reset()
    w = nn.Parameter(kiln.ones(2))
    out, got = kiln.compile(f)(kiln.ones(2, 3), w)
    assert got is w and got.is_leaf
    out.sum().backward()
    assert lin.weight.grad is not None


def test_train_eval_toggles_in_a_loop_replay_on_every_child():
    # The loop breaks (item()), so Module.train/eval frames are captured by themselves; their
    # `module.train(mode)` on the children ran for real while tracing only: from the second
    # epoch on, model.train() left BatchNorm in eval mode (wrong losses, no running-stat updates).
    def build():
        kiln.manual_seed(0)
        model = nn.Sequential(nn.Linear(4, 4), nn.BatchNorm1d(4))

        def run(x):
            log = []
            for _ in range(3):
                model.train()
                log.append(model(x).pow(2).sum().item())
                log.append((model.training, model[1].training))
                model.eval()
                with kiln.no_grad():
                    log.append(model(x).pow(2).sum().item())
                log.append((model.training, model[1].training))
            return log, model[1].running_mean.clone()

        return run

    x = kiln.randn(6, 4)
    want_log, want_mean = build()(x)
    kiln.compiler.reset()
    got_log, got_mean = kiln.compile(build())(x)
    np.testing.assert_allclose(got_log[::2], want_log[::2], rtol=1e-5)
    assert got_log[1::2] == want_log[1::2]
    np.testing.assert_allclose(got_mean.numpy(), want_mean.numpy(), rtol=1e-5, atol=1e-6)


def test_model_train_inside_a_compiled_function_does_not_recompile():
    model = nn.Sequential(nn.Linear(4, 4), nn.BatchNorm1d(4))
    calls = []

    def backend(gm, examples):
        calls.append(1)
        return gm

    def f(x):
        model.train()
        return model(x)

    kiln.compiler.reset()
    cf = kiln.compile(f, backend=backend)
    x = kiln.randn(6, 4)
    for _ in range(3):
        model.eval()
        cf(x)
        assert model.training and model[1].training
    assert len(calls) == 1


def test_deepcopy_of_a_module_and_of_tensors():
    # copy.deepcopy(model) (an EMA or teacher copy) raised "cannot pickle 'Tensor' object".
    import copy

    m = nn.Sequential(nn.Linear(3, 4), nn.BatchNorm1d(4))
    m(kiln.randn(5, 3)).sum().backward()
    m2 = copy.deepcopy(m)
    for a, b in zip(m.parameters(), m2.parameters()):
        assert type(b) is nn.Parameter and b.requires_grad and b is not a and b.grad is not a.grad
        assert kiln.equal(a, b) and kiln.equal(a.grad, b.grad)
    for a, b in zip(m.buffers(), m2.buffers()):
        assert b is not a and kiln.equal(a, b)
    with kiln.no_grad():
        m2[0].weight.add_(1)
    assert not kiln.equal(m[0].weight, m2[0].weight)
    t = kiln.ones(2, requires_grad=True)
    c = copy.deepcopy([t, t])
    assert c[0] is c[1] and c[0] is not t and c[0].requires_grad and c[0].is_leaf
    try:
        copy.deepcopy(t * 2)
        raise AssertionError("a non-leaf was deep-copied")
    except RuntimeError as e:
        assert "graph leaves" in str(e)


def test_batchnorm_twice_before_backward():
    # Two training-mode calls of one BatchNorm before backward (SimCLR's two views): the second
    # call's running-stat update bumped the version the first call's node had saved.
    bn, lin = nn.BatchNorm1d(4), nn.Linear(3, 4)
    x = kiln.randn(5, 3)
    version = bn.running_mean._version
    loss = bn(lin(x)).sum() + bn(lin(x + 1)).pow(2).sum()
    assert bn.running_mean._version == version  # as torch: the kernel's update is no in-place op
    loss.backward()
    assert lin.weight.grad is not None


def test_layer_norm_of_a_transposed_value_then_linear():
    # MLP-Mixer: layer_norm's decomposition kept the transposed input's strides where the eager
    # kernel returns a contiguous result, so the Linear's view of it failed when compiling.
    ln, lin = nn.LayerNorm(4), nn.Linear(4, 3)

    def f(a, b):
        return lin(ln(a.transpose(1, 2) + b.transpose(1, 2))).sum()

    a, b = kiln.randn(2, 4, 5), kiln.randn(2, 4, 5)
    kiln.compiler.reset()
    strict, kiln.config.strict = kiln.config.strict, True
    try:
        got = kiln.compile(f)(a, b)
    finally:
        kiln.config.strict = strict
    np.testing.assert_allclose(got.item(), f(a, b).item(), rtol=1e-5)


def test_hook_on_a_child_of_sequential_runs_on_every_call():
    # Sequential (kiln's) ran for real while tracing, so the hook below it appended a fake
    # (meta) tensor once, while tracing, and never again.
    model = nn.Sequential(nn.Linear(3, 4), nn.ReLU(), nn.Linear(4, 2))
    stats = []
    model[1].register_forward_hook(lambda m, inp, out: stats.append(out.detach().mean()))
    x = kiln.randn(5, 3)
    kiln.compiler.reset()
    f = kiln.compile(lambda x: model(x).sum())
    for i in range(3):
        f(x)
        assert len(stats) == i + 1 and stats[-1].device.type == "cpu"
    np.testing.assert_allclose(stats[-1].item(), model[1](model[0](x)).mean().item(), rtol=1e-6)


class _TimesTwoBackward(kiln.autograd.Function):
    @staticmethod
    def forward(ctx, x, scale):
        ctx.save_for_backward(x)
        return kiln.round(x / scale) * scale

    @staticmethod
    def backward(ctx, grad):
        (x,) = ctx.saved_tensors
        return grad * 2 + x * 0, None


def test_custom_function_with_grad_keeps_its_backward_under_compile():
    # The Function's backward was dropped while tracing: the compiled output did not require
    # grad (or, inside a model, the gradient silently skipped the custom backward).
    def f(w, x):
        return (x @ _TimesTwoBackward.apply(w, 0.05)).sum()

    w0, x = kiln.randn(3, 4), kiln.randn(2, 3)
    grads = []
    for fn in (f, kiln.compile(f)):
        kiln.compiler.reset()
        w = w0.clone().requires_grad_()
        fn(w, x).backward()
        grads.append(w.grad.numpy())
    np.testing.assert_allclose(grads[1], grads[0], rtol=1e-5, atol=1e-6)
    with kiln.no_grad():  # no backward to keep: traced into the graph
        e = _explain(f, w0, x)
    assert (e.graph_count, e.graph_break_count) == (1, 0), e.break_reasons


def test_module_compile_in_place():
    # model.compile() (torch's nn.Module.compile) was missing.
    class Net(nn.Module):
        def __init__(self):
            super().__init__()
            self.l1 = nn.Linear(6, 12)
            self.l2 = nn.Linear(12, 3)

        def forward(self, x):
            return self.l2(nn.functional.relu(self.l1(x)))

    kiln.manual_seed(0)
    model, x = Net(), kiln.randn(7, 6)
    want = model(x).detach().numpy()
    kiln.compiler.reset()
    assert model.compile() is None
    assert type(model) is Net and sorted(model.state_dict()) == ["l1.bias", "l1.weight", "l2.bias", "l2.weight"]
    for _ in range(2):
        got = model(x)
        np.testing.assert_allclose(got.detach().numpy(), want, rtol=1e-5, atol=1e-6)
    got.sum().backward()
    assert model.l1.weight.grad is not None
    e = _explain(lambda x: model(x), x)  # inside another compiled function: traced through
    assert (e.graph_count, e.graph_break_count) == (1, 0), e.break_reasons


def _make_step(model):
    @kiln.compile
    def step(x):
        h = x * 2
        print(end="")  # a graph break before the closure variable is used
        return model(h).sum()
    return step


def test_resume_function_uses_the_calling_closure_not_the_first_one():
    # Two closures of one code object: the glue's resume function was made with the first
    # one's cells, so the second call ran the first model (a silently wrong loss).
    kiln.compiler.reset()
    m1, m2 = nn.Linear(3, 1), nn.Linear(3, 1)
    x = kiln.ones(2, 3)
    s1, s2 = _make_step(m1), _make_step(m2)
    assert abs(s1(x).item() - m1(x * 2).sum().item()) < 1e-5
    assert abs(s2(x).item() - m2(x * 2).sum().item()) < 1e-5
    assert abs(s1(x).item() - m1(x * 2).sum().item()) < 1e-5  # the first entry still serves s1


def _factory_leaf(a):
    w = kiln.ones(2, requires_grad=True)
    return w * a, w


def _requires_grad_on_value(a):
    x = (a + 1).requires_grad_()
    return x * 2, x


def test_a_leaf_made_to_require_grad_in_the_graph_keeps_its_gradient():
    # The graph's outputs were plain tensors: `w` lost requires_grad and `w * a` its history,
    # so a gradient penalty's autograd.grad raised and w.grad silently stayed None.
    for fn in (_factory_leaf, _requires_grad_on_value):
        kiln.compiler.reset()
        out, leaf = kiln.compile(fn)(kiln.full((2,), 3.0))
        assert leaf.requires_grad and leaf.is_leaf and out.requires_grad, fn.__name__
        out.sum().backward()
        assert leaf.grad is not None, fn.__name__


def test_requires_grad_on_an_input_in_the_graph_sets_the_callers_tensor():
    def f(a):
        a.requires_grad_()
        return a * 2
    kiln.compiler.reset()
    a = kiln.ones(2)
    out = kiln.compile(f)(a)
    assert a.requires_grad and out.requires_grad


def _kind(f):
    try:
        f()
    except Exception as ex:  # noqa: BLE001 - the class is what is tested
        return type(ex).__name__
    return "no error"


def test_a_graph_break_inside_try_keeps_the_handler():
    # The breaking call ran in the glue, outside the try block: its exception escaped the
    # user's `except`.
    def bad():
        w = kiln.ones(2, requires_grad=True)
        w.add_(1)
    kiln.compiler.reset()
    assert kiln.compile(_kind)(bad) == "RuntimeError"
    assert kiln.compile(_kind)(lambda: None) == "no error"


def _double_break(s):
    return s.masked_fill(s > 0, float(decimal.Decimal(-1))).softmax(-1)


def test_two_breaks_in_one_statement_resume_with_distinct_argument_names():
    # The second resume function numbered its stack arguments past the NULLs it skipped and
    # repeated a name of the first one's: a SyntaxError from kiln's generated code.
    x = kiln.randn(4)
    kiln.compiler.reset()
    np.testing.assert_allclose(kiln.compile(_double_break)(x).numpy(), _double_break(x).numpy(), rtol=1e-6)


def test_reflect_replicate_circular_pad_compile_without_a_break():
    # The source index was a tensor made from a Python list: a break per pad call.
    def f(x):
        return (nn.functional.pad(x, (2, 1), mode="reflect"), nn.functional.pad(x, (1, 3), mode="replicate"),
                nn.functional.pad(x, (2, 2), mode="circular"))
    x = kiln.arange(10.0).reshape(2, 5)
    e = _explain(f, x)
    assert (e.graph_count, e.graph_break_count) == (1, 0), e.break_reasons
    a = x.numpy()
    want = (np.pad(a, ((0, 0), (2, 1)), mode="reflect"), np.pad(a, ((0, 0), (1, 3)), mode="edge"),
            np.pad(a, ((0, 0), (2, 2)), mode="wrap"))
    kiln.compiler.reset()
    for got, exp in zip(kiln.compile(f)(x), want):
        np.testing.assert_array_equal(got.numpy(), exp)


def test_embedding_max_norm_renormalizes_rows():
    weight = kiln.tensor([[3.0, 4.0], [0.3, 0.4], [6.0, 8.0]])
    ids = kiln.tensor([[0, 2], [0, 1]])
    w = weight.clone()
    out = nn.functional.embedding(ids, w, max_norm=1.0)
    np.testing.assert_allclose(w.numpy(), [[0.6, 0.8], [0.3, 0.4], [0.6, 0.8]], rtol=1e-5)
    np.testing.assert_allclose(out.numpy()[0, 1], [0.6, 0.8], rtol=1e-5)


def test_embedding_max_norm_in_a_compiled_training_step_keeps_the_weight_gradient():
    emb = nn.Embedding(5, 3, max_norm=0.5)
    ids = kiln.tensor([[0, 2], [4, 2]])
    kiln.compiler.reset()
    kiln.compile(lambda i: emb(i).pow(2).sum())(ids).backward()
    assert emb.weight.grad is not None


def test_layer_norm_repr_names_its_bias_as_torch():
    assert repr(nn.LayerNorm(8)) == "LayerNorm((8,), eps=1e-05, elementwise_affine=True, bias=True)"
    assert repr(nn.LayerNorm(8, bias=False)).endswith("bias=False)")
    assert repr(nn.LayerNorm(8, elementwise_affine=False)).endswith("elementwise_affine=False, bias=False)")


def test_finfo_and_iinfo():
    assert kiln.finfo(kiln.float32).eps == 2.0 ** -23 and kiln.finfo().dtype == "float32"
    assert kiln.finfo(kiln.bfloat16).max == float((2 - 2.0 ** -7) * 2.0 ** 127)
    assert kiln.finfo(kiln.float16).min == -65504.0 and kiln.finfo(kiln.float16).resolution == 0.001
    assert (kiln.iinfo(kiln.int8).min, kiln.iinfo(kiln.uint8).max, kiln.iinfo(kiln.int64).bits) == (-128, 255, 64)
    for bad in (lambda: kiln.finfo(kiln.int32), lambda: kiln.iinfo(kiln.float32)):
        try:
            bad()
        except TypeError:
            continue
        raise AssertionError("expected a TypeError")


def test_finfo_min_masking_compiles_and_matches_eager():
    def f(s):
        return s.masked_fill(s > 0, kiln.finfo(s.dtype).min).softmax(-1)
    s = kiln.randn(3, 5)
    kiln.compiler.reset()
    np.testing.assert_allclose(kiln.compile(f)(s).numpy(), f(s).numpy(), rtol=1e-6)


def test_dirac_init_is_an_identity_convolution():
    w = kiln.nn.init.dirac_(kiln.empty(4, 2, 3), groups=2)
    x = kiln.randn(1, 2, 7)
    y = nn.functional.conv1d(x, w, padding=1)
    np.testing.assert_allclose(y.numpy(), np.concatenate([x.numpy()] * 2, axis=1), rtol=1e-6)


def test_an_in_place_update_of_a_parameter_is_seen_by_the_module_in_the_same_graph():
    # The traced code's `lin.weight` and the weight Linear's forward read were two get_attr
    # nodes: the forward read the value from before `mul_` (a silently wrong output).
    lin = nn.Linear(3, 2, bias=False)
    w0 = lin.weight.detach().clone()
    x = kiln.ones(1, 3)

    def f(x):
        with kiln.no_grad():
            lin.weight.mul_(2)
        return lin(x)

    want = f(x).detach().numpy()
    with kiln.no_grad():
        lin.weight.copy_(w0)
    kiln.compiler.reset()
    np.testing.assert_allclose(kiln.compile(f)(x).detach().numpy(), want, rtol=1e-6)
    np.testing.assert_allclose(lin.weight.detach().numpy(), 2 * w0.numpy(), rtol=1e-6)


def test_embedding_max_norm_in_a_compiled_model_reads_the_renormed_rows():
    emb = nn.Embedding(5, 3, max_norm=0.5)
    with kiln.no_grad():
        emb.weight.mul_(3)
    w0 = emb.weight.detach().clone()
    ids = kiln.tensor([[0, 2], [4, 2]])
    want = emb(ids).detach().numpy()
    with kiln.no_grad():
        emb.weight.copy_(w0)
    kiln.compiler.reset()
    np.testing.assert_allclose(kiln.compile(emb)(ids).detach().numpy(), want, rtol=1e-5)


def _grad_after_a_break(s, lens):
    mask = kiln.arange(6) >= lens.unsqueeze(-1)
    p_nan = s.masked_fill(mask, float("-inf")).softmax(-1)
    p_where = kiln.where(mask.all(-1, keepdim=True), kiln.zeros_like(p_nan), p_nan)
    # A graph break: p_where reaches the next graph as an input with autograd history.
    p_min = nn.functional.softmax(s.masked_fill(mask, float(decimal.Decimal(-1e30))), dim=-1)
    loss = (p_min * s).sum() + (p_where * 3).sum()
    return kiln.autograd.grad(loss, s)[0]


def test_autograd_grad_after_a_break_keeps_the_gradient_through_earlier_graphs():
    # Traced on fakes in the graph after the break, the backward stopped at its inputs and
    # dropped the gradient flowing through `p`'s history (a silently wrong gradient).
    s = kiln.randn(2, 4, 6, requires_grad=True)
    lens = kiln.tensor([[6, 3, 0, 1], [2, 6, 5, 0]])
    want = _grad_after_a_break(s, lens).numpy()
    kiln.compiler.reset()
    np.testing.assert_allclose(kiln.compile(_grad_after_a_break)(s, lens).numpy(), want, rtol=1e-5, atol=1e-6)


def test_repeat_interleave_by_an_int_compiles_with_its_gradient():
    # An int count bound to the Tensor overload: index_select with data-dependent indices,
    # which cannot run on fakes (the backend failed).
    def f(x):
        return (x.repeat_interleave(2, dim=0) * 3).sum(0)
    x = kiln.arange(6.0).reshape(3, 2).requires_grad_()
    kiln.compiler.reset()
    out = kiln.compile(f)(x)
    np.testing.assert_allclose(out.detach().numpy(), [36.0, 54.0])
    out.sum().backward()
    np.testing.assert_allclose(x.grad.numpy(), np.full((3, 2), 6.0))
    y = kiln.arange(4.0)
    z = y.repeat_interleave(1)
    z[0] = 9.0
    assert y[0].item() == 0.0  # a new tensor, not a view


# --- session 10 sweep ---

@pytest.fixture
def strict():
    """A backend failure raises instead of falling back to eager (which would hide it)."""
    saved = kiln.config.strict
    kiln.config.strict = True
    yield
    kiln.config.strict = saved


def test_autograd_grad_in_a_compiled_function_leaves_grad_mode_on():
    # The engine restores grad mode after the last op it recorded: the traced frame ended with
    # the backward's mode (off), and every call left grad mode off for the caller.
    x = kiln.randn(3, 5, requires_grad=True)

    def fn(x):
        o = x.cumsum(dim=1)
        g, = kiln.autograd.grad((o * 2).sum(), x)
        return o, g

    for backend in ("eager", "inductor"):
        kiln.compiler.reset()
        f = kiln.compile(fn, backend=backend)
        for _ in range(2):
            _, g = f(x)
            assert kiln.is_grad_enabled(), backend
            np.testing.assert_allclose(g.numpy(), fn(x)[1].numpy(), rtol=1e-6)
        assert (x * 2).requires_grad


def test_cumprod_and_square_gradients_traced_by_aot(strict):
    # cumprod's backward tested its input for zeros with item() (not on AOT's meta tensors);
    # x ** 2's derivative recorded sub.Scalar(2, 1) with a Python number as self.
    x = kiln.randn(3, 5, requires_grad=True)

    def fn(x):
        c = kiln.cumprod(x * 0.5 + 1, dim=0)
        s = (x ** 2).sum()
        g, = kiln.autograd.grad(c.sum() + s, x)
        return c, g

    want = fn(x)
    kiln.compiler.reset()
    got = kiln.compile(fn)(x)
    for a, b in zip(got, want):
        np.testing.assert_allclose(a.detach().numpy(), b.detach().numpy(), rtol=1e-5, atol=1e-6)
    kiln.compiler.reset()
    y = kiln.tensor([[1.0, 0.0, 2.0], [3.0, 4.0, 0.0]], requires_grad=True)
    kiln.compile(lambda t: kiln.cumprod(t * 1.0, 1).sum())(y).backward()
    np.testing.assert_allclose(y.grad.numpy(), [[1.0, 3.0, 0.0], [5.0, 3.0, 12.0]])


def test_list_append_of_a_call_that_breaks_keeps_its_result(strict):
    # `res.append(f(x))` with a break inside f: the resume function got the real list's bound
    # append on its stack and called it on the fake result (a meta tensor in the returned list,
    # the second append lost).
    def f(x):
        print("side effect")
        return x * 2

    def run(x):
        res = []
        res.append(f(x))
        res.append(f(x) + 1)
        return res

    x = kiln.randn(4, 3)
    kiln.compiler.reset()
    compiled = kiln.compile(run)
    for _ in range(2):
        got = compiled(x)
        assert len(got) == 2 and all(t.device.type == "cpu" for t in got)
        np.testing.assert_allclose(got[0].numpy(), (x * 2).numpy())
        np.testing.assert_allclose(got[1].numpy(), (x * 2 + 1).numpy())


def test_compiled_model_called_from_a_compiled_step(strict):
    # kiln.compile(model) inside a traced frame ran its compiled forward on the fakes (a break
    # naming linear(), then a meta result); it is traced as the model itself, as TorchDynamo.
    model = nn.Sequential(nn.Linear(6, 8), nn.ReLU(), nn.Linear(8, 2))
    acts = []
    model[0].register_forward_hook(lambda m, i, o: acts.append(o.detach()))
    cmodel = kiln.compile(model)

    def step(x):
        out = cmodel(x)
        return out, cmodel(x + 1)

    x = kiln.randn(4, 6)
    want = (model(x), model(x + 1))
    e = _explain(step, x)
    assert (e.graph_count, len(e.break_reasons)) == (1, 0), e.break_reasons
    kiln.compiler.reset()
    got = kiln.compile(step)(x)
    for a, b in zip(got, want):
        assert a.device.type == "cpu"
        np.testing.assert_allclose(a.detach().numpy(), b.detach().numpy(), rtol=1e-5, atol=1e-6)


def test_eval_resnet_block_with_inplace_relu_compiles_under_inference_mode(strict):
    # No AOT autograd under inference_mode, so no functionalization: relu(inplace=True) and
    # `out += x` wrote values a convolution (run by oneDNN between compiled segments) reads,
    # and the backend refused the graph.
    class Block(nn.Module):
        def __init__(self):
            super().__init__()
            self.conv1 = nn.Conv2d(8, 8, 3, padding=1, bias=False)
            self.bn1 = nn.BatchNorm2d(8)
            self.relu = nn.ReLU(inplace=True)
            self.conv2 = nn.Conv2d(8, 8, 3, padding=1, bias=False)

        def forward(self, x):
            out = self.relu(self.bn1(self.conv1(x)))
            out = self.conv2(out)
            out += x
            return self.relu(out)

    model = nn.Sequential(nn.Conv2d(3, 8, 3, padding=1), nn.ReLU(inplace=True), nn.MaxPool2d(3, 2, 1), Block())
    model.eval()
    x = kiln.randn(4, 3, 12, 12)
    with kiln.inference_mode():
        want = model(x)
        kiln.compiler.reset()
        got = kiln.compile(model)(x)
    np.testing.assert_allclose(got.numpy(), want.numpy(), rtol=1e-5, atol=1e-5)


def test_tensor_unfold_is_a_view_with_pytorchs_shape_and_strides():
    a = np.arange(3 * 8 * 6, dtype=np.float32).reshape(3, 8, 6)
    x = kiln.from_numpy(a)
    for dim, size, step, shape, strides in [(1, 3, 2, (3, 3, 6, 3), (48, 12, 1, 6)),
                                            (-1, 6, 1, (3, 8, 1, 6), (48, 6, 1, 1)),
                                            (2, 2, 2, (3, 8, 3, 2), (48, 6, 2, 1))]:
        u = x.unfold(dim, size, step)
        assert tuple(u.shape) == shape and u.stride() == strides
        want = np.lib.stride_tricks.sliding_window_view(a, size, axis=dim % 3)
        want = np.take(want, range(0, want.shape[dim % 3], step), axis=dim % 3)
        np.testing.assert_array_equal(u.numpy(), want)
    x.unfold(1, 3, 2)[0, 0, 0, 0] = -1.0  # a view: writes reach the base
    assert a[0, 0, 0] == -1.0
    with pytest.raises(RuntimeError, match="maximum size for tensor at dimension 0 is 3 but size is 4"):
        kiln.ones(3).unfold(0, 4, 1)
    with pytest.raises(RuntimeError, match="step is 0 but must be > 0"):
        kiln.ones(3).unfold(0, 2, 0)


def test_unfold_patches_train_under_compile(strict):
    w = kiln.randn(12, 4, requires_grad=True)

    def fn(x):
        p = x.unfold(2, 2, 2).unfold(3, 2, 2).permute(0, 2, 3, 4, 5, 1).reshape(2, -1, 12)
        return (p @ w).tanh().sum()

    x = kiln.randn(2, 3, 4, 6)
    want = fn(x)
    want.backward()
    gw = w.grad.clone()
    w.grad = None
    kiln.compiler.reset()
    got = kiln.compile(fn)(x)
    got.backward()
    np.testing.assert_allclose(got.item(), want.item(), rtol=1e-5)
    np.testing.assert_allclose(w.grad.numpy(), gw.numpy(), rtol=1e-5, atol=1e-6)


def test_bucketize_is_searchsorted_of_the_boundaries():
    b = kiln.tensor([-1.0, 0.0, 0.5, 2.0])
    v = kiln.tensor([[-3.0, 0.0, 0.25], [0.5, 2.0, 9.0]])
    assert kiln.bucketize(v, b).tolist() == [[0, 1, 2], [2, 3, 4]]
    assert kiln.bucketize(v, b, right=True).tolist() == [[0, 2, 2], [3, 4, 4]]
    assert kiln.bucketize(v, b, out_int32=True).dtype == kiln.int32
    assert kiln.bucketize(0.5, b).item() == 2
    with pytest.raises(RuntimeError, match="boundaries tensor must be 1 dimension"):
        kiln.bucketize(v, b.reshape(2, 2))


def test_full_backward_hooks_see_grad_input_and_grad_output():
    model = nn.Sequential(nn.Linear(3, 4), nn.ReLU(), nn.Linear(4, 2))
    log = []
    h = model[2].register_full_backward_hook(lambda m, gi, go: log.append((gi[0].clone(), go[0].clone())))
    model[2].register_full_backward_pre_hook(lambda m, go: (go[0] * 2,))
    model[1].register_full_backward_hook(lambda m, gi, go: (gi[0] * 0.5,))
    first = []
    model[0].register_full_backward_hook(lambda m, gi, go: first.append(gi))
    x = kiln.randn(5, 3)
    out = model(x)
    out.sum().backward()
    (gi, go), = log
    np.testing.assert_allclose(go.numpy(), np.full((5, 2), 2.0))  # the pre-hook doubled it
    np.testing.assert_allclose(gi.numpy(), (go @ model[2].weight).detach().numpy(), rtol=1e-6)
    assert first == [(None,)]  # x needs no gradient: called from the output's backward
    # the ReLU hook halves what reaches Linear 0: its weight gradient is half the plain one
    plain = nn.Sequential(nn.Linear(3, 4), nn.ReLU(), nn.Linear(4, 2))
    plain.load_state_dict(model.state_dict())
    (plain(x) * 2).sum().backward()
    np.testing.assert_allclose(model[0].weight.grad.numpy(), plain[0].weight.grad.numpy() * 0.5, rtol=1e-5)
    h.remove()
    model.zero_grad()
    model(x).sum().backward()
    assert len(log) == 1
    kiln.compiler.reset()
    e = kiln.explain(model)(x)
    assert any("full backward hooks" in r.reason for r in e.all_break_reasons)


def _against_torch(cases, shape, grad=True):
    torch = pytest.importorskip("torch")
    a = np.random.default_rng(0).random(shape, dtype=np.float32)
    for case in cases:
        outs = []
        for T in (kiln, torch):
            x = T.from_numpy(a.copy()).requires_grad_(grad)
            ys = case(T, x)
            ys = ys if isinstance(ys, tuple) else (ys,)
            if grad:
                sum(((y * (i + 1)) ** 2).sum() for i, y in enumerate(ys)).backward()
            outs.append([y.detach().numpy() for y in ys] + ([x.grad.numpy()] if grad else []))
        for u, v in zip(*outs):
            assert u.shape == v.shape
            np.testing.assert_allclose(u, v, rtol=1e-5, atol=1e-6)


def test_diagonal_diag_meshgrid_broadcast_helpers_match_pytorch():
    _against_torch([
        lambda T, x: T.diagonal(x), lambda T, x: x.diagonal(1), lambda T, x: x.diagonal(-2, 1, 2),
        lambda T, x: T.diagonal(x[:, ::2], 0, 0, 2), lambda T, x: T.diag(x[0]), lambda T, x: T.diag(x[0, 0], -1),
        lambda T, x: T.diag(x[1, 2], 2), lambda T, x: T.meshgrid(x[0, 0], x[0, 1, :3], indexing="xy"),
        lambda T, x: T.meshgrid(x[0, 0, :2], x[0, 1, :3], x[1, 1], indexing="ij"),
        lambda T, x: T.broadcast_tensors(x[:, :1], x[0]), lambda T, x: x[:, :1].broadcast_to((3, 4, 5)),
    ], (3, 4, 5))
    d = kiln.zeros(3, 3)
    d.diagonal().fill_(1.0)  # a view: writes reach the base
    assert d.tolist() == kiln.eye(3).tolist()
    assert kiln.broadcast_shapes((3, 1), (1, 4), 4) == (3, 4)
    assert kiln.is_tensor(d) and not kiln.is_tensor(3) and d.is_floating_point() and kiln.numel(d) == 9
    with pytest.raises(RuntimeError, match="diagonal dimensions cannot be identical"):
        d.diagonal(0, 1, 1)


def test_pixel_shuffle_and_nearest_interpolate_match_pytorch():
    F = lambda T: T.nn.functional  # noqa: E731
    _against_torch([
        lambda T, x: F(T).pixel_shuffle(x, 2), lambda T, x: F(T).pixel_unshuffle(x[:, :, :4, :2], 2),
        lambda T, x: F(T).interpolate(x, scale_factor=2), lambda T, x: F(T).interpolate(x, size=(7, 4)),
        lambda T, x: F(T).interpolate(x, scale_factor=(1.5, 2.5)), lambda T, x: F(T).interpolate(x, size=(3, 2)),
        lambda T, x: F(T).interpolate(x[:, :, 0], scale_factor=3), lambda T, x: T.nn.Upsample(scale_factor=2)(x),
    ], (2, 8, 5, 3))
    with pytest.raises(NotImplementedError, match="antialias=True is not supported"):
        kiln.nn.functional.interpolate(kiln.ones(1, 1, 2, 2), scale_factor=2, mode="bicubic", antialias=True)
    with pytest.raises(NotImplementedError, match="mode='lanczos' is not supported"):
        kiln.nn.functional.interpolate(kiln.ones(1, 1, 2, 2), scale_factor=2, mode="lanczos")
    kiln.manual_seed(0)
    d = kiln.nn.Dropout2d(0.5)(kiln.ones(4, 16, 2, 2))
    per_channel = d.reshape(64, 4)
    assert ((per_channel == 0).all(1) | (per_channel == 2).all(1)).all()


def test_interpolate_nearest_exact_and_area_match_pytorch():
    # Modes real code uses (diffusers' nearest-exact, area downsampling): they raised
    # NotImplementedError.
    F = lambda T: T.nn.functional  # noqa: E731
    _against_torch([
        lambda T, x: F(T).interpolate(x, scale_factor=2, mode="nearest-exact"),
        lambda T, x: F(T).interpolate(x, size=(7, 4), mode="nearest-exact"),
        lambda T, x: F(T).interpolate(x, scale_factor=(1.5, 0.7), mode="nearest-exact"),
        lambda T, x: F(T).interpolate(x[:, :, 0], size=11, mode="nearest-exact"),
        lambda T, x: F(T).interpolate(x, size=(2, 3), mode="area"),
        lambda T, x: F(T).interpolate(x, scale_factor=0.5, mode="area"),
        lambda T, x: F(T).interpolate(x[:, :, 0], size=2, mode="area"),
    ], (2, 8, 5, 3))
    # 5-d area interpolation (adaptive_avg_pool3d) landed in session 14: it raised before.
    _against_torch([lambda T, x: F(T).interpolate(x, size=(2, 3, 1), mode="area")], (1, 2, 5, 4, 3))


def test_nearest_upsample_compiles_without_a_break(strict):
    up = nn.Sequential(nn.Conv2d(2, 4, 3, padding=1), nn.Upsample(scale_factor=2), nn.PixelShuffle(2))
    x = kiln.randn(1, 2, 3, 5)
    want = up(x)
    e = _explain(up, x)
    assert (e.graph_count, len(e.break_reasons)) == (1, 0), e.break_reasons
    kiln.compiler.reset()
    np.testing.assert_allclose(kiln.compile(up)(x).detach().numpy(), want.detach().numpy(), rtol=1e-5, atol=1e-6)


def test_dataloader_over_a_tensor_dataset():
    from kiln.utils.data import DataLoader, TensorDataset, default_collate, random_split
    x, y = kiln.arange(10.0).reshape(5, 2), kiln.arange(5)
    batches = [(a.tolist(), b.tolist()) for a, b in DataLoader(TensorDataset(x, y), batch_size=2)]
    assert batches == [([[0.0, 1.0], [2.0, 3.0]], [0, 1]), ([[4.0, 5.0], [6.0, 7.0]], [2, 3]), ([[8.0, 9.0]], [4])]
    assert len(DataLoader(TensorDataset(x, y), batch_size=2, drop_last=True)) == 2
    kiln.manual_seed(1)
    first = [b.tolist() for _, b in DataLoader(TensorDataset(x, y), batch_size=2, shuffle=True)]
    kiln.manual_seed(1)
    assert [b.tolist() for _, b in DataLoader(TensorDataset(x, y), batch_size=2, shuffle=True)] == first
    assert sorted(sum(first, [])) == [0, 1, 2, 3, 4]
    c = default_collate([{"a": 1, "b": kiln.ones(2)}, {"a": 2, "b": kiln.zeros(2)}])
    assert c["a"].tolist() == [1, 2] and c["b"].shape == (2, 2)
    assert [len(s) for s in random_split(TensorDataset(x, y), [0.6, 0.4])] == [3, 2]
    with pytest.raises(AssertionError, match="Size mismatch"):
        TensorDataset(x, kiln.arange(4))


def test_batchnorm_momentum_none_inside_a_compiled_model_averages_every_batch():
    # BatchNorm(momentum=None) reads 1 / float(num_batches_tracked) while kiln's library module
    # runs on fakes: the real buffer's value at trace time was baked into the graph (the factor
    # of the first batch every call: running_mean silently wrong). Reading a value the graph
    # reads is now a break, as in TorchDynamo.
    class M(nn.Module):
        def __init__(self):
            super().__init__()
            self.conv = nn.Conv2d(3, 3, 1)
            self.bn = nn.BatchNorm2d(3, momentum=None)

        def forward(self, x):
            return self.bn(self.conv(x)).relu()

    m, ref = M(), M()
    ref.load_state_dict(m.state_dict())
    kiln.compiler.reset()
    compiled = kiln.compile(m)
    xs = [kiln.randn(4, 3, 5, 5) * (i + 1) for i in range(3)]
    for x in xs:
        compiled(x).sum().backward()
        ref(x).sum().backward()
    np.testing.assert_allclose(m.bn.running_mean.numpy(), ref.bn.running_mean.numpy(), rtol=1e-5, atol=1e-6)
    np.testing.assert_allclose(m.bn.running_var.numpy(), ref.bn.running_var.numpy(), rtol=1e-5, atol=1e-6)
    assert int(m.bn.num_batches_tracked) == 3


def test_compiled_detach_of_an_input_and_next_of_parameters(strict):
    # repackage_hidden compiled: h.detach() of an input came back as a view requiring grad with
    # no derivative (backward through the next step failed); init_hidden's
    # next(self.parameters()).new_zeros(...) broke the frame ("a tensor made in the graph that
    # requires grad": next() handed back an existing parameter).
    def repackage(h):
        return h.detach() if isinstance(h, kiln.Tensor) else tuple(repackage(v) for v in h)

    w = kiln.ones(3, requires_grad=True)
    h = w * 2
    kiln.compiler.reset()
    r = kiln.compile(repackage)((h, h))
    assert all(not t.requires_grad and t.grad_fn is None for t in r)
    m = nn.Linear(3, 4)

    def init_hidden(x):
        return next(m.parameters()).new_zeros(2, 4) + x

    e = _explain(init_hidden, kiln.ones(2, 4))
    assert (e.graph_count, len(e.break_reasons)) == (1, 0), e.break_reasons


def test_diagonal_of_an_input_that_is_a_slice(strict):
    # The tracer's fakes start their storage at the data, so diagonal() records as_strided offsets
    # relative to the input; the eager views (outputs that are views, fallback steps) ran them
    # as absolute offsets and read before a sliced input's data: silently wrong values.
    data = kiln.from_numpy(np.arange(108, dtype=np.float32).reshape(12, 9))

    def fn(x):
        return x.t().diagonal(-1), x.diagonal(), x.diagonal(1) * 2, (x @ x.t()).diagonal()

    for attempt in range(2):  # the second compile of the same graph comes from the graph cache
        kiln.compiler.reset()
        compiled = kiln.compile(fn)
        for x in (data[:4, :4], data[4:8, 2:6], data[1:5, ::2]):
            for got, want in zip(compiled(x), fn(x)):
                np.testing.assert_array_equal(got.numpy(), want.numpy())


def test_data_pipeline_pieces_match_torch():
    # default_collate of Python floats gave float32 (torch: float64) and refused numpy arrays and
    # numpy scalars; IterableDataset, ConcatDataset (Dataset + Dataset), the samplers and
    # get_worker_info were missing.
    torch = pytest.importorskip("torch")

    def run(lib):
        D = lib.utils.data

        class Stream(D.IterableDataset):
            def __iter__(self):
                for i in range(7):
                    yield np.float32(i), np.arange(3) * i, float(i), {"k": i}

        out = [[(str(t.dtype).split(".")[-1], t.tolist()) for t in (a, b, c, d["k"])]
               for a, b, c, d in D.DataLoader(Stream(), batch_size=3)]
        ds = D.TensorDataset(lib.arange(5)) + D.TensorDataset(lib.arange(10, 13))
        out += [len(ds), ds[6][0].item(), ds[-1][0].item(), D.get_worker_info()]
        out.append(list(D.BatchSampler(D.SequentialSampler(range(7)), 3, drop_last=True)))
        out.append([b[0].tolist() for b in D.DataLoader(ds, batch_sampler=D.BatchSampler(D.SequentialSampler(ds), 3,
                                                                                          False))])
        out.append(len(D.DataLoader(ds, batch_size=3)))
        out.append(sorted(D.RandomSampler(range(5))) + sorted(D.SubsetRandomSampler([3, 5, 7])))
        out.append(len(list(D.WeightedRandomSampler([0.1, 0.9], 6))))
        for bad in (lambda: D.DataLoader(Stream(), shuffle=True), lambda: D.BatchSampler(range(3), 0, False),
                    lambda: D.DataLoader(ds, batch_size=2, batch_sampler=[[0]])):
            with pytest.raises(ValueError) as info:
                bad()
            out.append(str(info.value))
        return out

    assert run(kiln) == run(torch)


def test_dict_entry_holding_a_value_from_before_a_break_survives_the_next_break():
    # Found by sweep 12 rerunning sweep 9's init_variants: the side-effect replay of a dict read
    # its own old entry (`out['a']`, a tuple made before a graph break) after `out.clear()`:
    # KeyError at the second break. Values are now computed before any container is rewritten.
    def fn(w):
        out = {}
        out["a"] = (w.sum().item() <= 2, 1)
        lst = [w.max().item(), "x"]
        out["b"] = lst
        out["c"] = w.sum().item()
        return out, lst

    w = kiln.ones(3)
    assert kiln.compile(fn)(w) == fn(w) == ({"a": (False, 1), "b": [1.0, "x"], "c": 3.0}, [1.0, "x"])


def test_training_script_switches_and_grad_scaler_match_torch():
    # What nanoGPT-style scripts call on torch before training: backends flags, matmul precision,
    # deterministic mode, autocast(enabled=False), GradScaler (cuda: disabled with a warning
    # without CUDA; cpu: real loss scaling, skipped step on inf, backoff and growth), isin.
    torch = pytest.importorskip("torch")
    import warnings

    def run(lib):
        saved = (lib.backends.cuda.matmul.allow_tf32, lib.backends.cudnn.benchmark)
        try:
            return _switches_and_scaler(lib)
        finally:  # process-wide flags: leave them as found for later tests
            lib.backends.cuda.matmul.allow_tf32, lib.backends.cudnn.benchmark = saved

    def _switches_and_scaler(lib):
        lib.backends.cuda.matmul.allow_tf32 = True
        lib.backends.cudnn.benchmark = True
        lib.set_float32_matmul_precision("high")
        lib.use_deterministic_algorithms(True, warn_only=True)
        out = [lib.get_float32_matmul_precision(), lib.backends.cudnn.benchmark,
               lib.are_deterministic_algorithms_enabled(), lib.is_deterministic_algorithms_warn_only_enabled()]
        lib.set_float32_matmul_precision("highest")
        lib.use_deterministic_algorithms(False)
        a = lib.tensor([[1, 2], [3, 9]])
        out += [lib.isin(a, lib.tensor([2, 3, 5])).tolist(), lib.isin(a, 9).tolist(),
                lib.isin(a, lib.tensor([1]), invert=True).tolist(), lib.isin(3, a).tolist()]
        with lib.autocast("cpu", enabled=False):
            out.append(lib.ones(1).dtype == lib.float32)
        if not kiln.cuda.is_available():
            with warnings.catch_warnings(record=True) as caught:
                warnings.simplefilter("always")
                out.append(lib.cuda.amp.GradScaler().is_enabled())
            out.append(any("CUDA is not available.  Disabling." in str(w.message) for w in caught))
        scaler = lib.amp.GradScaler("cpu", init_scale=4.0, growth_interval=2)
        lin = lib.nn.Linear(2, 1)
        opt = lib.optim.SGD(lin.parameters(), lr=0.1)
        with lib.no_grad():
            lin.weight.fill_(1.0)
            lin.bias.fill_(0.0)
        for i in range(5):
            x = lib.tensor([[1.0, float("inf") if i == 1 else 2.0]])
            opt.zero_grad()
            scaler.scale(lin(x).sum()).backward()
            scaler.unscale_(opt)
            grad_norm = lib.nn.utils.clip_grad_norm_(lin.parameters(), 10.0)
            scaler.step(opt)
            scaler.update()
            out.append((scaler.get_scale(), lin.weight.tolist(), lin.bias.tolist(), math.isfinite(float(grad_norm))))
        out.append(scaler.state_dict())
        with pytest.raises(RuntimeError, match="unscale_\\(\\) has already been called"):
            scaler.unscale_(opt)
            scaler.unscale_(opt)
        return out

    import math
    assert run(kiln) == run(torch)
    with kiln.autocast("cpu", dtype=kiln.bfloat16):
        assert kiln.nn.Linear(2, 2)(kiln.ones(1, 2)).dtype == kiln.bfloat16


def test_masked_scatter_gradient_compiles_with_static_shapes():
    # masked_scatter's source gradient went through masked_select, whose size depends on the
    # mask's values: the compiled backward could not be traced on meta tensors (sweep13).
    r = np.random.default_rng(0)
    xn, sn = r.standard_normal((4, 5)).astype(np.float32), r.standard_normal(30).astype(np.float32)
    mn = r.random((1, 5)) > 0.4

    def f(x, m, src):
        y = x.masked_scatter(m, src * 3)
        return kiln.autograd.grad((y * kiln.arange(5.0)).sum(), [x, src])

    args = lambda: (kiln.from_numpy(xn).requires_grad_(), kiln.from_numpy(mn),  # noqa: E731
                    kiln.from_numpy(sn).requires_grad_())
    want = f(*args())
    np.testing.assert_array_equal(want[1].numpy()[:8], np.tile(np.arange(5.0), 4)[mn.repeat(4, 0).ravel()][:8] * 3)
    assert (want[1].numpy()[int(mn.sum()) * 4:] == 0).all()
    kiln.compiler.reset()
    got = kiln.compile(f)(*args())
    for g, w in zip(got, want):
        np.testing.assert_allclose(g.numpy(), w.numpy())
    meta = kiln._masked_scatter_backward(kiln.empty(4, 5, device="meta"), kiln.from_numpy(mn).to("meta"), [30])
    assert meta.shape == (30,)


def test_searchsorted_with_a_scalar_value_compiles():
    # searchsorted.Scalar's composite makes its value tensor for real while a trace runs it on
    # fake boundaries; the kernel then searched the fakes' missing data (a segfault, sweep13).
    ib = kiln.tensor([0, 2, 2, 5, 9])
    f = kiln.compile(lambda b: (kiln.searchsorted(b, 2), kiln.searchsorted(b, 5, right=True), b * 2))
    got = f(ib)
    assert (got[0].item(), got[1].item()) == (1, 4)
    assert kiln.searchsorted(ib.to("meta"), 3).device.type == "meta"


# --- session 14 sweep ---

def _arr(*shape, seed=0):
    return kiln.from_numpy(np.random.default_rng(seed).standard_normal(shape).astype(np.float32))


def test_fallback_reading_a_buffer_waits_for_writes_of_fallback_values(strict):
    # A fallback (sort) reading zeros written in place through slices, one slice's value from an
    # earlier fallback: the planner placed the reader by its only input (zeros), before the
    # writes' values were ready, and refused the graph (causal conv's input gradient, a beam
    # search's token buffer).
    def fn(x):
        s, _ = x.sort(dim=1)
        buf = kiln.zeros(2, 8)
        buf[:, 4:].copy_(s * 2)
        buf[:, :4].copy_(x)
        v, _ = buf.sort(dim=1)
        return v + 1

    x = _arr(2, 4)
    kiln.compiler.reset()
    np.testing.assert_allclose(kiln.compile(fn)(x).numpy(), fn(x).numpy())


def test_input_read_before_a_write_of_a_fallback_value_compiles(strict):
    # cache.index_copy_(...) on an input: index_copy (a fallback) and cache.sum() read the input
    # before the copy back; they may run before the write's segment (a KV cache update).
    def fn(x, cache, idx):
        total = cache.sum()
        cache.index_copy_(0, idx, x)
        return total, cache * 2

    x, idx = _arr(2, 4), kiln.tensor([3, 1])
    want_cache, got_cache = kiln.ones(5, 4), kiln.ones(5, 4)
    want = fn(x, want_cache, idx)
    kiln.compiler.reset()
    got = kiln.compile(fn)(x, got_cache, idx)
    for g, w in zip(got, want):
        np.testing.assert_allclose(g.numpy(), w.numpy())
    np.testing.assert_allclose(got_cache.numpy(), want_cache.numpy())


def test_autograd_grad_of_a_global_or_parameter_after_a_break(strict):
    # The graph before the break at autograd.grad returned the get_attr'd leaf as a new tensor
    # object, so grad() named a tensor the loss did not use ("One of the differentiated
    # Tensors appears to not have been used in the graph").
    lin = nn.Linear(5, 3)
    w = _arr(5, 5, seed=1).requires_grad_()

    def fn(x):
        gw, = kiln.autograd.grad((x @ w).sum(), [w])
        gx, gl = kiln.autograd.grad(lin(x).square().sum(), [x, lin.weight])
        return gw, gx, gl

    x = _arr(4, 5).requires_grad_()
    want = fn(x)
    kiln.compiler.reset()
    got = kiln.compile(fn)(x)
    for g, e in zip(got, want):
        np.testing.assert_allclose(g.numpy(), e.numpy(), rtol=1e-5, atol=1e-6)


def test_inductor_backward_never_reads_an_output_the_caller_modified(strict):
    # Eager and aot_eager raise "modified by an inplace operation" when a saved output is written
    # before backward. The inductor path saves its own buffers (an output it also saves is
    # copied, or recomputed from inputs), so it returns the gradient at the forward's values, as
    # torch.compile's inductor does: never one read from the modified memory. A change that
    # saves the output itself must keep the version check (this test then fails).
    def fn(x, w):
        return (x @ w).exp(), (x @ w).tanh().t()

    def grads(backend):
        x, w = _arr(3, 4).requires_grad_(), _arr(4, 2, seed=1).requires_grad_()
        kiln.compiler.reset()
        f = fn if backend is None else kiln.compile(fn, backend=backend)
        y, z = f(x, w)
        if backend is not None:
            with kiln.no_grad():
                y.mul_(0)
                z.mul_(0)
        (y.sum() + z.sum()).backward()
        return x.grad.numpy(), w.grad.numpy()

    want = grads(None)
    for got, w in zip(grads("inductor"), want):
        np.testing.assert_allclose(got, w, rtol=1e-5, atol=1e-6)
    with pytest.raises(RuntimeError, match="modified by an inplace operation"):
        grads("aot_eager")


def test_beam_search_writing_a_token_buffer_each_step_compiles(strict):
    # Each step writes the tokens topk chose (a fallback's values) into a preallocated buffer
    # and the next step reads it: the writes cannot share one compiled segment, and the graph was
    # refused (Uncuttable). The buffer's making, views and writes now run as eager steps between
    # the segments, in program order.
    B, V, S, D = 3, 7, 4, 5
    emb, proj = nn.Embedding(V, D), nn.Linear(D, V)

    def fn(h):
        tokens = kiln.zeros(B, S + 1, dtype=kiln.int64)
        scores = kiln.zeros(B)
        for t in range(S):
            h = kiln.tanh(h + emb(tokens[:, t]))
            cand = (scores[:, None] + kiln.log_softmax(proj(h), dim=-1)).view(-1)
            scores, idx = cand.topk(B)
            beam = kiln.div(idx, V, rounding_mode="floor")
            tokens.copy_(tokens.index_select(0, beam))
            tokens[:, t + 1] = idx % V
            h = h[beam]
        return tokens, scores

    h0 = _arr(B, D)
    with kiln.no_grad():
        want = fn(h0)
        kiln.compiler.reset()
        got = kiln.compile(fn)(h0)
    np.testing.assert_array_equal(got[0].numpy(), want[0].numpy())
    np.testing.assert_allclose(got[1].numpy(), want[1].numpy(), rtol=1e-5, atol=1e-6)
