"""einops on kiln tensors (kiln defines an einops backend named "kiln"): rearrange, reduce,
repeat, einsum, pack/unpack give torch's values and gradients, eagerly and compiled into one
graph. Skips without einops."""
import subprocess
import sys

import numpy as np
import pytest

import kiln
from oracle import need_torch

einops = pytest.importorskip("einops")


def program(T, x):
    a = einops.rearrange(x, "b c (h p) -> b (c p) h", p=2)
    b = einops.reduce(x, "b c h -> b c", "max")
    c = einops.repeat(x[:, 0], "b h -> b n h", n=3)
    d = einops.einsum(x, x, "b c h, b c g -> b h g")
    packed, shapes = einops.pack([x, x[:, 0]], "b * h")
    e = einops.unpack(packed * 2, shapes, "b * h")[1]
    return a.sum() + (b * b).sum() + c.mean() + d.sum() * 0.1 + e.sum()


def test_values_and_gradients_equal_torch():
    torch = need_torch()
    data = np.random.default_rng(0).standard_normal((2, 3, 4)).astype(np.float32)
    results = []
    for T, run in ((torch, program), (kiln, program), (kiln, kiln.compile(program))):
        x = T.tensor(data, requires_grad=True)
        out = run(T, x)
        out.backward()
        results.append((float(out.detach()), x.grad.numpy().copy()))
    for value, grad in results[1:]:
        assert abs(value - results[0][0]) < 1e-4
        np.testing.assert_allclose(grad, results[0][1], rtol=1e-5, atol=1e-5)


def test_compiled_einops_is_one_graph():
    kiln.compiler.reset()
    seen = []

    def backend(gm, example_inputs):
        seen.append(gm)
        return gm.forward

    x = kiln.randn(2, 3, 4)
    out = kiln.compile(lambda x: program(kiln, x), backend=backend)(x)
    assert len(seen) == 1
    np.testing.assert_allclose(float(out), float(program(kiln, x)), rtol=1e-5)


def test_einops_imported_before_kiln():
    code = ("import einops, kiln\n"
            "x = kiln.arange(6.).reshape(2, 3)\n"
            "print(einops.rearrange(x, 'a b -> b a').tolist())")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=120)
    assert out.returncode == 0, out.stderr
    assert out.stdout.strip() == "[[0.0, 3.0], [1.0, 4.0], [2.0, 5.0]]"


def test_kiln_layers_train_like_torch_layers():
    # A file moved to kiln imports einops.layers.kiln where it imported einops.layers.torch.
    torch = need_torch()
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
