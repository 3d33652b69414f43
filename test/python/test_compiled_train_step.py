"""kiln.compile of a whole training step (issue 15's "Must show", issue 16's graph counts):
zero_grad, forward, cross entropy, loss.backward(), optimizer.step() in one function. The step
compiles into a graph before the backward (zero_grad + forward + loss), a graph break at
backward (as torch.compile's), and a graph after it (the optimizer's update of every parameter
and its state); torch.compile makes 3 graphs and 2 breaks of this function. Five steps of a
small MLP and a small CNN with SGD (momentum, Nesterov, weight decay), Adam and AdamW: losses
within 1e-5 of kiln eager and 1e-4 of PyTorch, parameters after the steps too."""
import numpy as np
import pytest

import kiln
from kiln.compiler import bytecode

torch = pytest.importorskip("torch")
pytestmark = pytest.mark.skipif(not bytecode.supported(), reason="graph breaks resume on CPython 3.11 to 3.13")


def _mlp(lib):
    nn = lib.nn
    return nn.Sequential(nn.Linear(6, 16), nn.ReLU(), nn.Linear(16, 4))


def _cnn(lib):
    nn = lib.nn
    return nn.Sequential(nn.Conv2d(2, 4, 3, padding=1), nn.ReLU(), nn.Flatten(), nn.Linear(4 * 5 * 5, 4))


OPTIMIZERS = {
    "sgd": lambda lib, params: lib.optim.SGD(params, lr=0.1, momentum=0.9, nesterov=True, weight_decay=0.01),
    "adam": lambda lib, params: lib.optim.Adam(params, lr=0.01),
    "adamw": lambda lib, params: lib.optim.AdamW(params, lr=0.01, weight_decay=0.1),
}
MODELS = {"mlp": (_mlp, (8, 6)), "cnn": (_cnn, (8, 2, 5, 5))}


def _setup(lib, model_name, opt_name, torch_model):
    make, _ = MODELS[model_name]
    if lib is torch:
        model = torch_model
    else:
        model = make(kiln)
        model.load_state_dict({k: kiln.from_numpy(v.detach().numpy().copy())
                               for k, v in torch_model.state_dict().items()})
    opt = OPTIMIZERS[opt_name](lib, model.parameters())
    F = lib.nn.functional

    def step(x, y):
        opt.zero_grad()
        loss = F.cross_entropy(model(x), y)
        loss.backward()
        opt.step()
        return loss.detach()

    return model, step


def _batches(model_name, steps=5):
    r = np.random.default_rng(3)
    shape = MODELS[model_name][1]
    return [(r.standard_normal(shape).astype("float32"), r.integers(0, 4, size=shape[0]))
            for _ in range(steps)]


def _run(step, lib, batches):
    return [float(step(lib.from_numpy(x.copy()), lib.from_numpy(y.copy()))) for x, y in batches]


@pytest.mark.parametrize("model_name", sorted(MODELS))
@pytest.mark.parametrize("opt_name", sorted(OPTIMIZERS))
def test_compiled_train_step_matches_eager_and_torch(monkeypatch, model_name, opt_name):
    monkeypatch.setattr(kiln.config, "strict", True)
    batches = _batches(model_name)
    torch.manual_seed(0)
    reference = MODELS[model_name][0](torch)
    runs = {}
    for name, lib in (("torch", torch), ("eager", kiln), ("compiled", kiln)):
        torch_model = MODELS[model_name][0](torch)
        torch_model.load_state_dict(reference.state_dict())
        model, step = _setup(lib, model_name, opt_name, torch_model)
        if name == "compiled":
            kiln.compiler.reset()
            step = kiln.compile(step)
        runs[name] = (_run(step, lib, batches), [p.detach().numpy().copy() for p in model.parameters()])
    # Compiled Adam computes the bias corrections as tensor ops (torch's capturable formulation)
    # and SGD rounds eager's FMA apart: ulps per step, which five steps of training amplify.
    np.testing.assert_allclose(runs["compiled"][0], runs["eager"][0], rtol=0, atol=1e-5)
    np.testing.assert_allclose(runs["compiled"][0], runs["torch"][0], rtol=0, atol=1e-4)
    for got, eager, ref in zip(runs["compiled"][1], runs["eager"][1], runs["torch"][1]):
        np.testing.assert_allclose(got, eager, rtol=0, atol=1e-5)
        np.testing.assert_allclose(got, ref, rtol=0, atol=1e-4)


@pytest.mark.parametrize("model_name", sorted(MODELS))
@pytest.mark.parametrize("opt_name", sorted(OPTIMIZERS))
def test_train_step_graph_counts(opt_name, model_name):
    """As torch.compile: 3 graphs, 2 breaks. zero_grad runs eagerly (nothing before it), the
    forward and loss are a graph up to the break at loss.backward(), the optimizer's step is a
    graph of its own (a break at the call), and `loss.detach()` after it a third."""
    torch.manual_seed(0)
    _, step = _setup(kiln, model_name, opt_name, MODELS[model_name][0](torch))
    x, y = _batches(model_name, 1)[0]
    kiln.compiler.reset()
    e = kiln.explain(step)(kiln.from_numpy(x), kiln.from_numpy(y))
    kiln.compiler.reset()
    assert (e.graph_count, e.graph_break_count) == (3, 2), e.break_reasons
    assert "backward" in str(e.break_reasons[0])  # zero_grad, first, has no graph before it


def test_optimizer_step_compiles_as_an_inference_graph(caplog):
    """The step's graph runs under no_grad and returns detached values: nothing in it records
    autograd, so it goes to the inductor as an inference graph (frame_callback._needs_autograd
    follows the graph's grad-mode switches) instead of AOT autograd's joint trace, although the
    parameters it reads require grad."""
    import logging

    log = logging.getLogger("kiln.aot")  # kiln's loggers do not propagate to the root
    log.addHandler(caplog.handler)
    level = log.level
    log.setLevel(logging.INFO)
    kiln.manual_seed(0)
    model = _mlp(kiln)
    params = list(model.parameters())
    opt = kiln.optim.SGD(params, lr=0.1, momentum=0.9)

    def step():
        opt.step()
        return [p.detach() * 2 for p in params]

    model(kiln.ones(3, 6)).sum().backward()
    kiln.compiler.reset()
    try:
        got = kiln.compile(step)()
    finally:
        log.removeHandler(caplog.handler)
        log.setLevel(level)
    assert len(got) == len(params)
    assert not any("autograd" in r.getMessage() for r in caplog.records), [r.getMessage() for r in caplog.records]


def test_step_with_grad_clipping_and_param_groups(monkeypatch):
    """clip_grad_norm_ scales the grads in place before AdamW (decay and no-decay groups) reads
    them: compiled under strict (with _fused_adam_ in the graph, the inductor could not cut it
    around the grads written in place); as torch.compile, 4 graphs and 3 breaks: the forward and
    loss, the clipping after backward(), the optimizer's step (a graph of its own), the detach."""
    monkeypatch.setattr(kiln.config, "strict", True)
    batches = _batches("mlp")
    torch.manual_seed(0)
    reference = _mlp(torch)
    losses = []
    for compiled in (False, True):
        model = _mlp(kiln)
        model.load_state_dict({k: kiln.from_numpy(v.detach().numpy().copy())
                               for k, v in reference.state_dict().items()})
        decay = [p for p in model.parameters() if p.dim() == 2]
        no_decay = [p for p in model.parameters() if p.dim() < 2]
        opt = kiln.optim.AdamW([{"params": decay, "weight_decay": 0.1},
                                {"params": no_decay, "weight_decay": 0.0}], lr=0.01)

        def step(x, y):
            opt.zero_grad(set_to_none=True)
            loss = kiln.nn.functional.cross_entropy(model(x), y)
            loss.backward()
            kiln.nn.utils.clip_grad_norm_(model.parameters(), 0.5)
            opt.step()
            return loss.detach()

        if compiled:
            kiln.compiler.reset()
            x, y = batches[0]
            e = kiln.explain(step)(kiln.from_numpy(x.copy()), kiln.from_numpy(y.copy()))
            assert (e.graph_count, e.graph_break_count) == (4, 3), e.break_reasons
            kiln.compiler.reset()
            model.load_state_dict({k: kiln.from_numpy(v.detach().numpy().copy())
                                   for k, v in reference.state_dict().items()})
            opt.state.clear()
            step = kiln.compile(step)
        losses.append(_run(step, kiln, batches))
    np.testing.assert_allclose(losses[1], losses[0], rtol=0, atol=1e-5)


def test_generated_graph_module_frames_inside_a_step_are_not_captured():
    """The CNN's compiled backward runs convolution_backward as a fallback kernel (a GraphModule's
    generated forward) inside the step's glue, where the frame hook is on: that frame was
    captured and compiled as a graph of its own (a CNN step took 134 ms against 42 ms with only
    the loss compiled). Generated GraphModule code is skipped like the glue."""
    import logging

    log = logging.getLogger("kiln.graph")  # kiln's loggers do not propagate to the root
    seen = []
    handler = logging.Handler()
    handler.emit = lambda record: seen.append(record.getMessage())
    level = log.level
    log.addHandler(handler)
    log.setLevel(logging.INFO)
    try:
        torch.manual_seed(0)
        _, step = _setup(kiln, "cnn", "sgd", _cnn(torch))
        kiln.compiler.reset()
        compiled = kiln.compile(step)
        for x, y in _batches("cnn", 3):
            compiled(kiln.from_numpy(x), kiln.from_numpy(y))
    finally:
        log.removeHandler(handler)
        log.setLevel(level)
    graphs = [m.splitlines()[0] for m in seen if m.startswith("graph ")]
    assert graphs and not any("GraphModule" in g for g in graphs), graphs


@pytest.mark.parametrize("opt_name", sorted(OPTIMIZERS))
def test_compiled_optimizer_step_method(monkeypatch, opt_name):
    """kiln.compile(opt.step), as torch users write torch.compile(opt.step): the parameters come
    through the argument `self` (self.param_groups[0]["params"][i]) and key `self.state`; they are
    pinned by identity guards when used as dict keys (before: the frame broke at
    `state[param]`, "a tensor used as a dict key"). One graph, equal to eager steps."""
    monkeypatch.setattr(kiln.config, "strict", True)
    torch.manual_seed(0)
    reference = _mlp(torch)
    params_after = []
    for compiled in (False, True):
        model = _mlp(kiln)
        model.load_state_dict({k: kiln.from_numpy(v.detach().numpy().copy())
                               for k, v in reference.state_dict().items()})
        opt = OPTIMIZERS[opt_name](kiln, model.parameters())
        step = opt.step
        if compiled:
            kiln.compiler.reset()
            step = kiln.compile(opt.step)
        for x, y in _batches("mlp", 3):
            opt.zero_grad()
            kiln.nn.functional.cross_entropy(model(kiln.from_numpy(x)), kiln.from_numpy(y)).backward()
            step()
        params_after.append([p.detach().numpy().copy() for p in model.parameters()])
    for got, want in zip(params_after[1], params_after[0]):
        np.testing.assert_allclose(got, want, rtol=0, atol=1e-6)
    e = kiln.explain(opt.step)()
    assert (e.graph_count, len(e.break_reasons)) == (1, 0), e.break_reasons
    if opt_name == "sgd":
        # Each parameter's update (weight decay, momentum and Nesterov, the parameter written in
        # place) is one kernel: in-place writes fuse where read only at the element written.
        assert e.kernels_per_graph[0].num_kernels == len(list(model.parameters())), e.kernels_per_graph[0]


def test_hidden_state_detached_inside_the_compiled_step_cuts_its_history():
    # Truncated BPTT (pytorch/examples word_language_model's repackage_hidden): the step detaches
    # the hidden state the previous step returned. The compiled node still had an edge to that
    # state's history (the previous compiled node, its saved tensors freed by the previous
    # backward): "Trying to backward through the graph a second time" on the second step.
    lin = kiln.nn.Linear(3, 3)
    x = kiln.ones(2, 3)

    def step(x, h):
        h = h.detach()
        out = kiln.tanh(lin(x) + h)
        lin.zero_grad()
        out.sum().backward()
        return out, lin.weight.grad.clone()

    compiled = kiln.compile(step)
    h_eager = h_compiled = kiln.zeros(2, 3)
    for _ in range(3):
        h_eager, g_eager = step(x, h_eager)
        h_compiled, g_compiled = compiled(x, h_compiled)
        np.testing.assert_allclose(g_compiled.numpy(), g_eager.numpy(), rtol=1e-5, atol=1e-6)
    assert h_compiled.grad_fn is not None  # the outputs keep their own history
