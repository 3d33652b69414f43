"""kiln.amp against torch.amp on the CPU: GradScaler's scale trajectory, skipped steps and
parameters (with gradients made inf on chosen steps), its errors and state dict; autocast's
behaviour where torch disables it (no CUDA, enabled=False) and its clear error elsewhere."""
import warnings

import numpy as np
import pytest

import kiln
from oracle import need_torch


def train(T, steps=12, bad_steps=(2, 3, 7), growth_interval=3):
    rng = np.random.default_rng(0)
    model = T.nn.Linear(4, 2)
    with T.no_grad():
        model.weight.copy_(T.from_numpy(rng.standard_normal((2, 4)).astype(np.float32)))
        model.bias.zero_()
    opt = T.optim.SGD(model.parameters(), lr=0.1)
    scaler = T.amp.GradScaler("cpu", init_scale=256.0, growth_interval=growth_interval)
    x = T.from_numpy(rng.standard_normal((8, 4)).astype(np.float32))
    scales, results = [], []
    for step in range(steps):
        opt.zero_grad()
        loss = (model(x) ** 2).mean()
        scaler.scale(loss).backward()
        if step in bad_steps:
            model.weight.grad[0, 0] = float("inf") if step % 2 else float("nan")
        results.append(scaler.step(opt))
        scaler.update()
        scales.append(scaler.get_scale())
    return scales, model.weight.detach().numpy().copy(), scaler.state_dict()


def test_grad_scaler_matches_torch():
    torch = need_torch()
    (ks, kw, ksd), (ts, tw, tsd) = train(kiln), train(torch)
    assert ks == ts
    np.testing.assert_allclose(kw, tw, rtol=1e-6)
    assert ksd == tsd


def test_grad_scaler_unscale_clip_and_errors():
    torch = need_torch()
    out = []
    for T in (kiln, torch):
        p = T.nn.Parameter(T.ones(3))
        opt = T.optim.SGD([p], lr=1.0)
        scaler = T.amp.GradScaler("cpu", init_scale=4.0)
        scaler.scale((p * T.tensor([1.0, 2.0, 3.0])).sum()).backward()
        scaler.unscale_(opt)
        T.nn.utils.clip_grad_norm_([p], 1.0)
        with pytest.raises(RuntimeError, match="already been called"):
            scaler.unscale_(opt)
        scaler.step(opt)
        with pytest.raises(RuntimeError, match="after step"):
            scaler.unscale_(opt)
        scaler.update()
        out.append(p.detach().numpy().copy())
    np.testing.assert_allclose(out[0], out[1], rtol=1e-6)
    scaled = kiln.amp.GradScaler("cpu", init_scale=2.0).scale([kiln.ones(2), (kiln.ones(1),)])
    assert scaled[0].tolist() == [2.0, 2.0] and scaled[1][0].tolist() == [2.0]


def test_disabled_scaler_is_transparent():
    p = kiln.nn.Parameter(kiln.ones(2))
    opt = kiln.optim.SGD([p], lr=1.0)
    scaler = kiln.amp.GradScaler("cpu", enabled=False)
    loss = p.sum()
    assert scaler.scale(loss) is loss and scaler.get_scale() == 1.0 and scaler.state_dict() == {}
    loss.backward()
    scaler.step(opt)
    scaler.update()
    assert p.tolist() == [0.0, 0.0]


def test_cuda_spellings_disable_without_cuda(monkeypatch):
    monkeypatch.setattr(kiln.cuda, "is_available", lambda: False)
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        scaler = kiln.cuda.amp.GradScaler()
        with kiln.autocast("cuda"):
            assert not kiln.is_autocast_enabled()
        with kiln.cuda.amp.autocast():
            y = kiln.ones(2) * 2
    messages = [str(w.message) for w in caught]
    assert not scaler.is_enabled() and y.tolist() == [2.0, 2.0]
    assert any("CUDA is not available.  Disabling" in m for m in messages)
    assert any("Disabling autocast" in m for m in messages)
    assert any("deprecated" in m for m in messages)


def test_autocast_takes_effect_and_restores_state():
    with kiln.autocast("cpu", enabled=False):
        assert kiln.ones(2, 2).matmul(kiln.ones(2, 2)).dtype == kiln.float32
    with kiln.autocast("cpu", dtype=kiln.bfloat16):
        assert kiln.is_autocast_enabled("cpu") and kiln.get_autocast_dtype("cpu") == kiln.bfloat16
        assert (kiln.ones(2, 2) @ kiln.ones(2, 2)).dtype == kiln.bfloat16
    assert not kiln.is_autocast_enabled("cpu")
    assert (kiln.ones(2, 2) @ kiln.ones(2, 2)).dtype == kiln.float32

    @kiln.autocast("cpu")
    def f(x):
        return x @ x

    assert f(kiln.ones(2, 2)).dtype == kiln.bfloat16


def test_disabled_autocast_inside_a_compiled_frame_is_a_no_op(monkeypatch):
    """HF-style `with torch.autocast(device_type, enabled=False):` around a computation in a
    compiled forward: one graph, no break (torch.compile: the same)."""
    monkeypatch.setattr(kiln.cuda, "is_available", lambda: False)

    def f(x):
        with kiln.autocast("cuda"):
            y = x * 2
        with kiln.autocast("cpu", enabled=False):
            y = y + 1
        return y.sin()

    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        kiln.compiler.reset()
        report = kiln.explain(f)(kiln.ones(3))
        assert (report.graph_count, report.graph_break_count) == (1, 0)
        np.testing.assert_allclose(kiln.compile(f)(kiln.ones(3)).numpy(), np.sin(np.full(3, 3.0)), rtol=1e-6)

    def g(x):
        with kiln.autocast("cpu"):
            return x @ x

    assert kiln.compile(g)(kiln.ones(3, 3)).dtype == kiln.bfloat16


def test_grad_scaler_inside_a_compiled_step_matches_eager():
    """Regression: GradScaler.scale() run for real on a trace's fakes kept a meta scale tensor
    (the next eager call failed: 'Cannot copy out of meta tensor'), and scaler.step() ran the
    optimizer's step on the fakes (AdamW's state left without exp_avg). Its first scale() and
    unscale_/step/update are graph breaks run eagerly."""
    def run(compiled):
        kiln.manual_seed(0)
        model = kiln.nn.Sequential(kiln.nn.Linear(4, 8), kiln.nn.GELU(), kiln.nn.Linear(8, 1))
        opt = kiln.optim.AdamW(model.parameters(), lr=1e-2)
        scaler = kiln.amp.GradScaler("cpu", init_scale=1024.0, growth_interval=2)
        xs = [kiln.randn(6, 4) for _ in range(4)]
        xs[2][0, 1] = float("inf")
        y = kiln.randn(6, 1)

        def step(x):
            loss = kiln.nn.functional.mse_loss(model(x), y)
            opt.zero_grad(set_to_none=True)
            scaler.scale(loss).backward()
            scaler.unscale_(opt)
            scaler.step(opt)
            scaler.update()
            return loss.detach()

        f = kiln.compile(step) if compiled else step
        return [f(x).item() for x in xs], scaler.get_scale(), [p.detach().clone() for p in model.parameters()]

    (le, se, pe), (lc, sc, pc) = run(False), run(True)
    np.testing.assert_allclose(lc, le, rtol=1e-6)
    assert sc == se
    for a, b in zip(pc, pe):
        np.testing.assert_allclose(a.numpy(), b.numpy(), rtol=1e-4, atol=1e-6)  # compiled kernels round differently
