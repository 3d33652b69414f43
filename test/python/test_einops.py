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
