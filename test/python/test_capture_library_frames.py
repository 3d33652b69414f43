"""Which frames a compiled function captures besides its own (issue 16): as torch.compile skips
torch.nn's and torch.autograd's frames entered from eager code, kiln's own library frames
(kiln.nn modules and functions, kiln.nn.utils, an optimizer's zero_grad, the lr schedulers)
entered from a frame that runs eagerly are not captured; the user's frames under them (a
module's forward) are, each as a graph of its own. An optimizer's step is captured, as
torch.compile captures torch.optim's: one graph per step, the lr a graph input once a scheduler
changed it. A training loop compiled whole (a break inside its `for`) thus compiles the user's
forward and the optimizer's step, not every library call of the loop."""
import numpy as np

import kiln
from kiln import nn

F = nn.functional


class _Net(nn.Module):
    def __init__(self):
        super().__init__()
        self.fc1 = nn.Linear(5, 8)
        self.fc2 = nn.Linear(8, 3)

    def forward(self, x):
        return self.fc2(F.relu(self.fc1(x)))


def _training_loop(model, opt, library_model):
    def run(x, y):
        losses = []
        for _ in range(3):
            opt.zero_grad()
            loss = F.cross_entropy(model(x), y) + library_model(x).mean()
            loss.backward()
            nn.utils.clip_grad_norm_(model.parameters(), 1.0)
            opt.step()
            losses.append(loss.item())
        model.eval()
        out = model(x)
        model.train()
        return losses, out
    return run


def _setup():
    kiln.manual_seed(0)
    model = _Net()
    library_model = nn.Sequential(nn.Linear(5, 4), nn.ReLU())
    opt = kiln.optim.SGD(list(model.parameters()) + list(library_model.parameters()), lr=0.1, momentum=0.9)
    x = kiln.randn(6, 5)
    y = kiln.tensor([0, 1, 2, 0, 1, 2])
    return _training_loop(model, opt, library_model), x, y


def test_a_training_loop_compiled_whole_captures_only_user_frames():
    run, x, y = _setup()
    explained = kiln.explain(run)(x, y)
    # The loop runs eagerly (backward and .item() break inside the `for`); the user's forward
    # is captured once (it serves eval mode too: no module reads its training flag), and the
    # SGD step twice (the first makes the momentum buffers, the second reads them);
    # cross_entropy, the Sequential, clip_grad_norm_, zero_grad, train() and eval() run eagerly.
    # torch.compile: the same 3 graphs.
    assert explained.graph_count == 3
    assert explained.graph_break_count == 2
    reasons = [str(r) for r in explained.all_break_reasons]
    assert any("zero_grad" in r for r in reasons)  # the first break of the loop
    assert not any("clip_grad" in r or "generator" in r for r in reasons)


def test_a_training_loop_compiled_whole_equals_eager():
    run, x, y = _setup()
    losses, out = run(x, y)
    kiln.compiler.reset()
    run_c, x, y = _setup()
    losses_c, out_c = kiln.compile(run_c)(x, y)
    np.testing.assert_allclose(losses_c, losses, rtol=1e-5, atol=1e-6)
    np.testing.assert_allclose(out_c.detach().numpy(), out.detach().numpy(), rtol=1e-5, atol=1e-6)


def test_library_frames_are_still_captured_as_the_root():
    lin = nn.Linear(4, 3)
    x = kiln.randn(2, 4)
    explained = kiln.explain(lin)(x)
    assert explained.graph_count == 1 and explained.graph_break_count == 0


def test_a_frame_without_ops_compiles_no_graph():
    # As torch.compile: a frame with no tensor operation (only Python values passed through)
    # is not counted as a graph.
    def fn(x, n):
        return x, n + 1

    x = kiln.randn(3)
    explained = kiln.explain(fn)(x, 2)
    assert explained.graph_count == 0 and explained.graph_break_count == 0
    out, n = kiln.compile(fn)(x, 2)
    assert out is x and n == 3


def _scheduled_loop(kind, scheduled, steps=6):
    """A loop that runs eagerly (backward and .item() break in its `for`) around a model, an
    optimizer of `kind` and, when `scheduled`, a cosine schedule changing the lr every step."""
    kiln.manual_seed(0)
    model = nn.Sequential(nn.Linear(4, 8), nn.ReLU(), nn.Linear(8, 1))
    opt = {"sgd": lambda p: kiln.optim.SGD(p, lr=0.1),
           "sgd_momentum": lambda p: kiln.optim.SGD(p, lr=0.1, momentum=0.9),
           "adamw": lambda p: kiln.optim.AdamW(p, lr=0.01)}[kind](model.parameters())
    sched = kiln.optim.lr_scheduler.CosineAnnealingLR(opt, T_max=steps) if scheduled else None
    x, y = kiln.randn(16, 4), kiln.randn(16, 1)

    def run(x, y):
        losses = []
        for _ in range(steps):
            loss = F.mse_loss(model(x), y)
            loss.backward()
            opt.step()
            opt.zero_grad()
            if sched is not None:
                sched.step()
            losses.append(loss.item())
        return losses, [p.detach().clone() for p in model.parameters()]

    return run, x, y


# torch.compile's counts for the same loop (torch 2.13, torch._dynamo.explain): the step is one
# graph with the lr a constant; a second graph when the state made by the first step is read
# (SGD's momentum buffers; Adam's state is made before tracing) or when the lr changed (it is an
# input from then on: later steps compile nothing).
_TORCH_GRAPHS = {("sgd", False): 1, ("sgd", True): 2, ("sgd_momentum", False): 2,
                 ("sgd_momentum", True): 2, ("adamw", False): 1, ("adamw", True): 2}


def test_optimizer_steps_called_from_eager_code_are_captured_as_torch_compile_does():
    for (kind, scheduled), graphs in _TORCH_GRAPHS.items():
        run, x, y = _scheduled_loop(kind, scheduled)
        losses, params = run(x, y)
        kiln.compiler.reset()
        run_c, x, y = _scheduled_loop(kind, scheduled)
        explained = kiln.explain(run_c)(x, y)
        assert (explained.graph_count, explained.graph_break_count) == (graphs, graphs - 1), (kind, scheduled)
        run_c, x, y = _scheduled_loop(kind, scheduled)
        losses_c, params_c = kiln.compile(run_c)(x, y)
        np.testing.assert_allclose(losses_c, losses, rtol=1e-5, atol=1e-6)
        for p_c, p in zip(params_c, params):
            np.testing.assert_allclose(p_c.numpy(), p.numpy(), rtol=1e-5, atol=1e-6)
        kiln.compiler.reset()


def test_a_scheduled_lr_is_a_graph_input_after_one_recompile():
    compiled = []

    def counting(gm, example_inputs, **kwargs):
        compiled.append([tuple(t.shape) for t in example_inputs])
        return gm.forward

    run, x, y = _scheduled_loop("sgd", True, steps=8)
    kiln.compiler.reset()
    kiln.compile(run, backend=counting)(x, y)
    # Eight steps at eight learning rates: two compiles of the step, the second taking the lr
    # as a 0-d input besides the grads.
    assert len(compiled) == 2
    assert compiled[1].count(()) == 1 and () not in compiled[0]
    kiln.compiler.reset()


def test_scheduled_lrs_of_two_optimizer_classes_are_specialized_each_first():
    # kiln's optimizers share one step wrapper (one code object); which floats changed is kept
    # per step function, as torch.compile keeps it per code object: SGD's first step after
    # AdamW's compiles with its lr a constant and recompiles once it changed (torch 2.13: 4
    # graphs; kiln made SGD's lr an input at once from AdamW's history: 3).
    kiln.manual_seed(0)
    model = nn.Sequential(nn.Linear(4, 8), nn.ReLU(), nn.Linear(8, 1))
    adam = kiln.optim.AdamW(model.parameters(), lr=0.01)
    sgd = kiln.optim.SGD(model.parameters(), lr=0.1)
    scheds = [kiln.optim.lr_scheduler.CosineAnnealingLR(o, T_max=4) for o in (adam, sgd)]
    x, y = kiln.randn(16, 4), kiln.randn(16, 1)

    def run(x, y):
        losses = []
        for opt, sched in zip((adam, sgd), scheds):
            for _ in range(4):
                loss = F.mse_loss(model(x), y)
                loss.backward()
                opt.step()
                opt.zero_grad()
                sched.step()
                losses.append(loss.item())
        return losses

    kiln.compiler.reset()
    explained = kiln.explain(run)(x, y)
    assert (explained.graph_count, explained.graph_break_count) == (4, 3), str(explained)
    kiln.compiler.reset()


def test_a_library_modules_training_flag_is_guarded_only_where_it_is_read():
    # A Linear computes the same in eval mode: one graph serves both (torch.compile: one);
    # a Dropout reads its flag: a second graph in eval mode, which must not drop anything.
    for layer, graphs in ((nn.Linear(4, 4), 1), (nn.Dropout(0.5), 2)):
        model = nn.Sequential(nn.Linear(4, 4), layer)
        compiled = []

        def counting(gm, example_inputs, **kwargs):
            compiled.append(gm)
            return gm.forward

        kiln.compiler.reset()
        forward = kiln.compile(lambda x: model(x) * 2, backend=counting)
        x = kiln.randn(3, 4)
        forward(x)
        model.eval()
        out = forward(x)
        np.testing.assert_allclose(out.detach().numpy(), (model(x) * 2).detach().numpy(), rtol=1e-6)
        model.train()
        assert len(compiled) == graphs, layer
    kiln.compiler.reset()


def test_a_library_modules_forward_with_hooks_is_captured_from_eager_code():
    # As TorchDynamo's trace_rules: an inbuilt module's forward entered from eager code is
    # captured when the module has forward hooks (a hook may break the caller's graph); without
    # hooks it runs eagerly (torch.compile: the same counts, checked with torch._dynamo.explain).
    act = nn.ReLU()
    stats = []
    model = nn.Sequential(nn.Linear(4, 4), act)

    def run(x):
        outs = []
        for _ in range(2):
            outs.append(model(x).sum().item())
        return outs

    x = kiln.randn(3, 4)
    kiln.compiler.reset()
    assert kiln.explain(run)(x).graph_count == 0
    act.register_forward_hook(lambda m, inp, out: stats.append(out.detach().mean()))
    kiln.compiler.reset()
    e = kiln.explain(run)(x)
    # ReLU.forward, then the hook (recompiled once: it appends to `stats`, whose length is
    # guarded).
    assert e.graph_count == 3, str(e)
    kiln.compiler.reset()


def test_a_custom_functions_backward_is_not_captured():
    # The autograd engine calls a custom Function's backward under a compiled function: captured,
    # it guarded each call's new ctx (a recompile per call) or broke at ctx.saved_tensors; it
    # runs eagerly now, as its forward (torch.compile has no graph of its own for it either).
    class Square(kiln.autograd.Function):
        @staticmethod
        def forward(ctx, x):
            ctx.save_for_backward(x)
            return x * x

        @staticmethod
        def backward(ctx, grad):
            (x,) = ctx.saved_tensors
            return grad * 2 * x

    w = nn.Parameter(kiln.randn(3))

    def run():
        grads = []
        for _ in range(3):
            w.grad = None
            Square.apply(w).sum().backward()
            grads.append(w.grad.clone())
        return grads

    kiln.compiler.reset()
    e = kiln.explain(run)()
    assert not any("saved_tensors" in str(r) or "backward" in str(r.filename) for r in e.break_reasons)
    kiln.compiler.reset()
    for g in kiln.compile(run)():
        np.testing.assert_allclose(g.numpy(), (2 * w).detach().numpy(), rtol=1e-6)
    kiln.compiler.reset()
