"""Which frames a compiled function captures besides its own (issue 16): as torch.compile skips
torch.nn's and torch.autograd's frames entered from eager code, kiln's own library frames
(kiln.nn modules and functions, kiln.optim, kiln.nn.utils) entered from a frame that runs
eagerly are not captured; the user's frames under them (a module's forward) are, each as a
graph of its own. A training loop compiled whole (a break inside its `for`) thus compiles the
user's forward, not every library call of the loop."""
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
    # is captured in training and in eval mode; cross_entropy, the Sequential, clip_grad_norm_,
    # zero_grad, step, train() and eval() run eagerly (torch.compile: the same two forwards,
    # plus the optimizer's step, which kiln does not capture from eager code).
    assert explained.graph_count == 2
    assert explained.graph_break_count == 1
    reasons = [str(r) for r in explained.break_reasons]
    assert any("backward" in r for r in reasons)
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
