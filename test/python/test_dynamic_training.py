"""Training over size symbols (docs/dynamic-shapes.md, "Training"): a kiln.compile'd module
trained with a last short batch, or at changing sequence lengths, compiles its forward and
backward at most twice (the second compile over size symbols, as torch.compile's automatic
dynamic shapes), and every loss and gradient equals eager kiln's at every size."""
import math
import os
import shutil

import numpy as np
import pytest

import kiln

pytestmark = pytest.mark.skipif(shutil.which(os.environ.get("KILN_CXX", "c++")) is None,
                                reason="no C++ compiler")
F = kiln.nn.functional


@pytest.fixture(autouse=True)
def fresh(tmp_path_factory, monkeypatch):
    monkeypatch.setattr(kiln.config, "cache_dir", str(tmp_path_factory.getbasetemp() / "dyn-train-cache"))
    monkeypatch.setattr(kiln.config, "strict", True)
    kiln.compiler.reset()
    yield
    kiln.compiler.reset()


def _twins(make):
    kiln.manual_seed(0)
    compiled = make()
    kiln.manual_seed(0)
    return compiled, make()


def _train_and_compare(model, eager, batches, rtol=1e-4, atol=1e-5):
    run = kiln.compile(model)
    for args in batches:
        for m in (model, eager):
            for p in m.parameters():
                p.grad = None
        # (the same draws for a dropout in both: each call from the same generator state)
        kiln.manual_seed(len(batches))
        got = run(*args)
        kiln.manual_seed(len(batches))
        want = eager(*args)
        got.backward()
        want.backward()
        np.testing.assert_allclose(got.detach().numpy(), want.detach().numpy(), rtol=rtol, atol=atol)
        for (name, p), q in zip(model.named_parameters(), eager.parameters()):
            np.testing.assert_allclose(p.grad.numpy(), q.grad.numpy(), rtol=rtol, atol=atol, err_msg=name)


class MLP(kiln.nn.Module):
    def __init__(self, loss):
        super().__init__()
        self.l1, self.l2, self.loss = kiln.nn.Linear(32, 64), kiln.nn.Linear(64, 10), loss

    def forward(self, x, y):
        h = F.relu(self.l1(x))
        if self.loss == "dropout":  # random draws of a symbolic shape, the mask saved for backward
            h = F.dropout(h, 0.3)
        out = self.l2(h)
        return F.mse_loss(out, y) if self.loss == "mse" else F.cross_entropy(out, y)


@pytest.mark.parametrize("loss", ["mse", "cross_entropy", "dropout"])
def test_mlp_last_short_batch_compiles_twice(training_compiles, loss):
    r = np.random.default_rng(0)

    def batch(b):
        x = kiln.from_numpy(r.standard_normal((b, 32)).astype(np.float32))
        y = (kiln.from_numpy(r.standard_normal((b, 10)).astype(np.float32)) if loss == "mse"
             else kiln.from_numpy(r.integers(0, 10, b)))
        return x, y

    model, eager = _twins(lambda: MLP(loss))
    _train_and_compare(model, eager, [batch(b) for b in (8, 7, 5, 3, 8)])
    assert training_compiles == [None, "x: f32[s0, 32]; y: " + ("f32[s0, 10]" if loss == "mse" else "i64[s0]")]


class Block(kiln.nn.Module):
    """A GPT-style pre-norm block (causal attention, GELU MLP) and a mean-squared loss."""

    def __init__(self, d=32, heads=4):
        super().__init__()
        self.heads = heads
        self.ln1, self.ln2 = kiln.nn.LayerNorm(d), kiln.nn.LayerNorm(d)
        self.qkv, self.proj = kiln.nn.Linear(d, 3 * d), kiln.nn.Linear(d, d)
        self.fc, self.out = kiln.nn.Linear(d, 4 * d), kiln.nn.Linear(4 * d, d)

    def forward(self, x, target):
        b, s, d = x.shape
        hd = d // self.heads
        q, k, v = self.qkv(self.ln1(x)).reshape(b, s, 3, self.heads, hd).permute(2, 0, 3, 1, 4).unbind(0)
        a = (q @ k.transpose(-2, -1)) / math.sqrt(hd)
        mask = kiln.ones(s, s, dtype=kiln.bool).triu(1)
        a = kiln.softmax(a.masked_fill(mask, float("-inf")), dim=-1) @ v
        x = x + self.proj(a.transpose(1, 2).reshape(b, s, d))
        x = x + self.out(F.gelu(self.fc(self.ln2(x))))
        return F.mse_loss(x, target)


def test_gpt_block_over_sequence_lengths_compiles_twice(training_compiles):
    r = np.random.default_rng(1)
    batches = []
    for s in range(8, 17):
        x = kiln.from_numpy(r.standard_normal((2, s, 32)).astype(np.float32))
        batches.append((x, kiln.from_numpy(r.standard_normal((2, s, 32)).astype(np.float32))))
    model, eager = _twins(Block)
    _train_and_compare(model, eager, batches, rtol=1e-4, atol=1e-5)
    assert training_compiles == [None, "x: f32[2, s0, 32]; target: f32[2, s0, 32]"]


def test_gpt_language_model_over_sequence_lengths_compiles_twice(training_compiles):
    # The GPT-2-style character model of test_training.py (embeddings, weight tying, both
    # attention paths, a causal-mask buffer sliced to the length, cross_entropy with
    # ignore_index): the mask's block_size bounds the guarded range.
    import sys

    sys.path.insert(0, os.path.join(os.path.dirname(__file__), "..", "..", "bench"))
    from training_models import gpt_classes

    GPT = gpt_classes(kiln)
    model, eager = _twins(lambda: GPT(block_size=32))
    r = np.random.default_rng(2)
    run = kiln.compile(model)
    for t in (8, 9, 12, 16):
        x = r.integers(0, 32, size=(4, t))
        y = np.roll(x, -1, axis=1)
        y[:, -1] = -1
        losses = []
        for m, f in ((model, run), (eager, eager)):
            for p in m.parameters():
                p.grad = None
            _, loss = f(kiln.from_numpy(x), kiln.from_numpy(y))
            loss.backward()
            losses.append(float(loss))
        assert losses[0] == pytest.approx(losses[1], abs=1e-5)
        for (name, p), q in zip(model.named_parameters(), eager.parameters()):
            np.testing.assert_allclose(p.grad.numpy(), q.grad.numpy(), rtol=1e-4, atol=1e-6, err_msg=name)
    assert training_compiles == [None, "idx: i64[4, s0]; targets: i64[4, s0]"]
