"""Transposed convolutions, 1-d and adaptive pooling, instance norm and linear interpolation
against torch: forward, gradients, modules (repr, parameters), errors, and under kiln.compile."""
import numpy as np
import pytest

import kiln
from conftest import needs_cxx
from kiln import nn
from oracle import assert_match, both, need_torch, sample

F = nn.functional
TOL32 = dict(rtol=1e-4, atol=1e-5)


def grads_match(kfn, tfn, arrays, dtype, tol):
    """kfn and tfn on the same inputs: equal outputs and input gradients (for a random cotangent)."""
    torch = need_torch()
    pairs = [both(a.astype(np.float32 if dtype == "bfloat16" else dtype), dtype) for a in arrays]
    for k, t in pairs:
        k.requires_grad_(True)
        t.requires_grad_(True)
    kout, tout = kfn(*[k for k, _ in pairs]), tfn(*[t for _, t in pairs])
    assert_match(kout, tout, **tol)
    kg, tg = both(sample(tuple(tout.shape), "float32", seed=99).astype(np.float32 if dtype == "bfloat16" else dtype),
                  dtype)
    (kout * kg).sum().backward()
    (tout * tg).sum().backward()
    for k, t in pairs:
        assert_match(k.grad, t.grad, **tol)
    del torch


CONV_T = [
    (1, (2, 4, 7), (4, 3, 3), dict(stride=2, padding=1, output_padding=1)),
    (1, (4, 7), (4, 3, 3), dict(dilation=3, output_padding=2)),  # unbatched; output_padding < dilation
    (2, (2, 4, 5, 6), (4, 2, 3, 2), dict(stride=(2, 1), padding=(1, 0), output_padding=(1, 0), groups=2,
                                         dilation=(1, 2))),
    (2, (1, 3, 4, 4), (3, 5, 3, 3), dict()),
    (2, (2, 4, 5, 6), (4, 3, 1, 1), dict(stride=3, output_padding=2)),
]


@pytest.mark.parametrize("dtype", ["float32", "float64"])
@pytest.mark.parametrize("dims,xs,ws,kw", CONV_T, ids=[str(c[3]) for c in CONV_T])
def test_conv_transpose_matches_torch(dims, xs, ws, kw, dtype):
    torch = need_torch()
    bias = sample((ws[1] * kw.get("groups", 1),), "float32", seed=3)
    name = f"conv_transpose{dims}d"
    grads_match(lambda x, w, b: getattr(F, name)(x, w, b, **kw),
                lambda x, w, b: getattr(torch.nn.functional, name)(x, w, b, **kw),
                [sample(xs, "float32", seed=1), sample(ws, "float32", seed=2), bias], dtype,
                TOL32 if dtype == "float32" else {})


def test_conv_transpose_bfloat16_and_no_bias():
    torch = need_torch()
    grads_match(lambda x, w: F.conv_transpose2d(x, w, stride=2), lambda x, w: torch.nn.functional.conv_transpose2d(
        x, w, stride=2), [sample((1, 2, 3, 3), "float32", seed=4), sample((2, 3, 2, 2), "float32", seed=5)],
        "bfloat16", dict(rtol=2e-2, atol=5e-2))


def test_conv_transpose_modules_match_torch():
    torch = need_torch()
    for dims, args, kw in [(1, (4, 6, 3), dict(stride=2, padding=1)),
                           (2, (4, 6, (3, 2)), dict(stride=2, groups=2, bias=False, dilation=2, output_padding=1))]:
        torch.manual_seed(0)
        tm = getattr(torch.nn, f"ConvTranspose{dims}d")(*args, **kw)
        km = getattr(nn, f"ConvTranspose{dims}d")(*args, **kw)
        assert repr(km) == repr(tm)
        assert [(n, tuple(p.shape)) for n, p in km.named_parameters()] == \
            [(n, tuple(p.shape)) for n, p in tm.named_parameters()]
        km.load_state_dict({k: kiln.from_numpy(v.numpy().copy()) for k, v in tm.state_dict().items()})
        kx, tx = both(sample((2, 4) + (5,) * dims, "float32", seed=6))
        with torch.no_grad():
            assert_match(km(kx), tm(tx), **TOL32)
            want = [10] if dims == 1 else [13, 12]
            assert_match(km(kx, output_size=want), tm(tx, output_size=want), **TOL32)
    for lib in (torch, kiln):
        m = lib.nn.ConvTranspose2d(2, 2, 3, stride=2)
        with pytest.raises(ValueError, match="requested an output size of \\[20, 20\\], but valid sizes range from"):
            m(lib.ones(1, 2, 4, 4), output_size=[20, 20])
        with pytest.raises(ValueError, match='Only "zeros" padding mode is supported for ConvTranspose2d'):
            lib.nn.ConvTranspose2d(2, 2, 3, padding_mode="reflect")
        with pytest.raises(RuntimeError, match="Given transposed=1, weight of size \\[4, 3, 3\\], expected input"):
            lib.nn.functional.conv_transpose1d(lib.ones(1, 5, 8), lib.ones(4, 3, 3))
        with pytest.raises(RuntimeError, match="output padding must be smaller than either stride or dilation"):
            lib.nn.functional.conv_transpose1d(lib.ones(1, 4, 8), lib.ones(4, 3, 3), output_padding=1)


class Decoder(nn.Module):
    def __init__(self):
        super().__init__()
        self.up1 = nn.ConvTranspose2d(4, 3, 3, stride=2, padding=1, output_padding=1)
        self.up2 = nn.ConvTranspose1d(3, 2, 2, stride=2)

    def forward(self, x):
        y = self.up1(x).relu()
        return self.up2(y.flatten(2)).tanh()


@needs_cxx
def test_conv_transpose_trains_under_compile_like_eager():
    x = kiln.from_numpy(sample((2, 4, 3, 3), "float32", seed=7))
    losses = {}
    for mode in ("eager", "compiled"):
        kiln.manual_seed(0)
        model = Decoder()
        opt = kiln.optim.SGD(model.parameters(), lr=0.1)
        fwd = model if mode == "eager" else kiln.compile(model)
        losses[mode] = []
        for _ in range(3):
            loss = (fwd(x) ** 2).mean()
            opt.zero_grad()
            loss.backward()
            opt.step()
            losses[mode].append(loss.item())
    np.testing.assert_allclose(losses["compiled"], losses["eager"], rtol=1e-5, atol=1e-6)
