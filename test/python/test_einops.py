"""einops on kiln tensors (kiln/_einops.py): rearrange/reduce/repeat/pack/einsum equal to einops
on torch tensors, gradients flow, and under kiln.compile einops calls are traced into the graph
(no break)."""
import numpy as np
import pytest

import kiln

einops = pytest.importorskip("einops")

X = np.random.default_rng(0).standard_normal((2, 3, 4, 6)).astype(np.float32)


def _apply(T):
    x = T.from_numpy(X.copy()).requires_grad_()
    outs = [einops.rearrange(x, "b c (h p) w -> b (h w) (p c)", p=2),
            einops.reduce(x, "b c h w -> b c", "max"),
            einops.reduce(x, "b c (h h2) (w w2) -> b c h w", "mean", h2=2, w2=3),
            einops.repeat(x[0, 0], "h w -> h w r", r=3),
            einops.einsum(x, x, "b c h w, b d h w -> b c d"),
            einops.pack([x, x[:, 0]], "b * w")[0]]
    sum(o.sum() for o in outs).backward()
    return [o.detach().numpy() for o in outs] + [x.grad.numpy()]


def test_einops_functions_match_torch():
    torch = pytest.importorskip("torch")
    for a, b in zip(_apply(kiln), _apply(torch)):
        np.testing.assert_allclose(a, b, rtol=1e-5, atol=1e-5)


def test_einops_compiles_into_one_graph():
    def f(x, w):
        h = einops.rearrange(x, "b c h w -> b (h w) c")
        q = einops.einsum(h, w, "b n c, c d -> b n d")
        return einops.reduce(q.relu(), "b n d -> b d", "mean")

    x, w = kiln.from_numpy(X), kiln.randn(3, 5)
    kiln.compiler.reset()
    report = kiln.explain(f)(x, w)
    assert (report.graph_count, report.graph_break_count) == (1, 0)
    np.testing.assert_allclose(kiln.compile(f)(x, w).numpy(), f(x, w).numpy(), rtol=1e-5, atol=1e-6)


def test_einops_imported_before_kiln():
    import subprocess
    import sys

    code = ("import einops, kiln\n"
            "x = kiln.arange(6.).reshape(2, 3)\n"
            "from einops.layers.kiln import Rearrange\n"
            "print(einops.rearrange(x, 'a b -> b a').tolist(), Rearrange('a b -> b a')(x).tolist())")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=120)
    assert out.returncode == 0, out.stderr
    assert out.stdout.strip() == "[[0.0, 3.0], [1.0, 4.0], [2.0, 5.0]] [[0.0, 3.0], [1.0, 4.0], [2.0, 5.0]]"


def test_kiln_layers_train_like_torch_layers():
    # A file moved to kiln imports einops.layers.kiln where it imported einops.layers.torch
    # (lucidrains/vit-pytorch's patch embedding).
    torch = pytest.importorskip("torch")
    from einops.layers.kiln import Rearrange, Reduce
    from einops.layers.torch import Rearrange as TRearrange, Reduce as TReduce

    data = np.random.default_rng(1).standard_normal((2, 3, 8, 8)).astype(np.float32)
    losses = []
    for T, R, Rd in ((torch, TRearrange, TReduce), (kiln, Rearrange, Reduce)):
        T.manual_seed(0)
        net = T.nn.Sequential(R("b c (h p1) (w p2) -> b (h w) (p1 p2 c)", p1=4, p2=4), T.nn.Linear(48, 5),
                              Rd("b n d -> b d", "mean"))
        opt = T.optim.SGD(net.parameters(), lr=0.1)
        run = kiln.compile(net) if T is kiln else net
        for _ in range(2):
            opt.zero_grad()
            loss = run(T.tensor(data)).square().mean()
            loss.backward()
            opt.step()
        losses.append(float(loss.detach()))
    assert abs(losses[0] - losses[1]) < 1e-6
    assert repr(Rearrange("b c -> c b")) == "Rearrange('b c -> c b')"
