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
def test_conv_transpose_trains_under_compile_like_eager(strict_inductor):
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


# -- pooling, instance norm, interpolation -----------------------------------------------------
FUNCTIONAL = [
    ("max_pool1d", (2, 3, 9), dict(kernel_size=3, stride=2, padding=1)),
    ("max_pool1d", (3, 9), dict(kernel_size=2, ceil_mode=True, dilation=2)),
    ("avg_pool1d", (2, 3, 9), dict(kernel_size=3, stride=2, padding=1, count_include_pad=False)),
    ("avg_pool1d", (3, 9), dict(kernel_size=4, ceil_mode=True)),
    ("adaptive_avg_pool1d", (2, 3, 10), dict(output_size=4)),
    ("adaptive_max_pool1d", (2, 3, 10), dict(output_size=4)),
    ("adaptive_max_pool2d", (2, 3, 7, 10), dict(output_size=(3, 4))),
    ("adaptive_max_pool2d", (3, 5, 6), dict(output_size=(None, 4))),
    ("instance_norm", (2, 3, 5, 4), dict()),
    ("instance_norm", (2, 3, 7), dict(eps=1e-3)),
    ("interpolate", (2, 3, 7), dict(size=12, mode="linear")),
    ("interpolate", (2, 3, 7), dict(scale_factor=2.5, mode="linear", align_corners=True)),
    ("interpolate", (2, 3, 5, 6), dict(size=(9, 4), mode="bilinear")),
    ("interpolate", (2, 3, 5, 6), dict(scale_factor=2, mode="bilinear", align_corners=True)),
    ("interpolate", (2, 3, 5, 6), dict(scale_factor=(1.7, 0.6), mode="bilinear")),
    ("interpolate", (2, 3, 5, 6), dict(scale_factor=(1.7, 0.6), mode="bilinear", recompute_scale_factor=True)),
    ("interpolate", (1, 2, 3, 4, 5), dict(scale_factor=2, mode="trilinear")),
]


@pytest.mark.parametrize("dtype", ["float32", "float64"])
@pytest.mark.parametrize("name,shape,kw", FUNCTIONAL, ids=[f"{n}-{k}" for n, _, k in FUNCTIONAL])
def test_pool_norm_interpolate_match_torch(name, shape, kw, dtype):
    torch = need_torch()
    grads_match(lambda x: getattr(F, name)(x, **kw), lambda x: getattr(torch.nn.functional, name)(x, **kw),
                [sample(shape, "float32", seed=12)], dtype, TOL32 if dtype == "float32" else {})


@pytest.mark.parametrize("name,shape,kw", [("max_pool1d", (2, 3, 9), dict(kernel_size=3, stride=2, padding=1)),
                                           ("adaptive_max_pool1d", (2, 3, 10), dict(output_size=4)),
                                           ("adaptive_max_pool2d", (2, 3, 7, 10), dict(output_size=(3, 4))),
                                           ("adaptive_max_pool2d", (3, 5, 6), dict(output_size=(None, 4)))])
def test_pool_indices_match_torch(name, shape, kw):
    torch = need_torch()
    kx, tx = both(np.round(sample(shape, "float32", seed=13)))  # rounded: ties, where the first max wins
    assert_match(getattr(F, name)(kx, return_indices=True, **kw),
                 getattr(torch.nn.functional, name)(tx, return_indices=True, **kw))


def test_pool_and_instance_norm_modules_match_torch():
    torch = need_torch()
    cases = [("MaxPool1d", (3, 2, 1)), ("AvgPool1d", (3,)), ("AdaptiveAvgPool1d", (4,)),
             ("AdaptiveMaxPool1d", (3,)), ("AdaptiveMaxPool2d", ((2, None),))]
    kx, tx = both(sample((2, 3, 9), "float32", seed=14))
    for name, args in cases:
        km, tm = getattr(nn, name)(*args), getattr(torch.nn, name)(*args)
        assert repr(km) == repr(tm)
        x = (kx, tx) if "2d" not in name else (kx.unsqueeze(0), tx.unsqueeze(0))
        assert_match(km(x[0]), tm(x[1]))
    for cfg in (dict(), dict(affine=True), dict(affine=True, track_running_stats=True, momentum=0.3)):
        km, tm = nn.InstanceNorm1d(3, **cfg), torch.nn.InstanceNorm1d(3, **cfg)
        assert repr(km) == repr(tm) and list(km.state_dict()) == list(tm.state_dict())
        with torch.no_grad():
            for p in tm.parameters():
                p.uniform_(0.5, 1.5)
            km.load_state_dict({k: kiln.from_numpy(v.numpy().copy()) for k, v in tm.state_dict().items()})
            assert_match(km(kx), tm(tx), **TOL32)
            assert_match(km(kx[0]), tm(tx[0]), **TOL32)  # unbatched
            km.eval()
            tm.eval()
            assert_match(km(kx), tm(tx), **TOL32)
            assert_match(list(km.state_dict().values()), list(tm.state_dict().values()), **TOL32)
    km2, tm2 = nn.InstanceNorm2d(3, affine=True), torch.nn.InstanceNorm2d(3, affine=True)
    kx2, tx2 = both(sample((2, 3, 4, 5), "float32", seed=15))
    with torch.no_grad():
        assert_match(km2(kx2), tm2(tx2), **TOL32)
    for lib in (torch, kiln):
        with pytest.raises(ValueError, match="expected 3D or 4D input \\(got 2D input\\)"):
            lib.nn.InstanceNorm2d(3)(lib.ones(3, 4))
        with pytest.raises(ValueError, match="expected input's size at dim=1 to match num_features \\(4\\)"):
            lib.nn.InstanceNorm1d(4, affine=True)(lib.ones(2, 3, 5))
        with pytest.raises(ValueError, match="Expected more than 1 spatial element when training"):
            lib.nn.functional.instance_norm(lib.ones(2, 3, 1))
        with pytest.raises(NotImplementedError, match="Got 4D input, but linear mode needs 3D input"):
            lib.nn.functional.interpolate(lib.ones(1, 2, 3, 4), scale_factor=2, mode="linear")
        with pytest.raises(ValueError, match="align_corners option can only be set with the interpolating modes"):
            lib.nn.functional.interpolate(lib.ones(1, 2, 3), scale_factor=2, align_corners=True)
    ku = nn.Upsample(scale_factor=2, mode="bilinear", align_corners=True)
    tu = torch.nn.Upsample(scale_factor=2, mode="bilinear", align_corners=True)
    assert repr(ku) == repr(tu)
    assert_match(ku(kx2), tu(tx2), **TOL32)


class PoolNet(nn.Module):
    def __init__(self):
        super().__init__()
        self.conv = nn.Conv1d(3, 4, 3)
        self.norm = nn.InstanceNorm1d(4, affine=True)
        self.pool = nn.MaxPool1d(2)
        self.avg = nn.AvgPool1d(2)
        self.amax = nn.AdaptiveMaxPool2d((2, 3))
        self.up = nn.Upsample(scale_factor=2, mode="linear")

    def forward(self, x):
        h = self.norm(self.conv(x)).relu()
        h = self.up(self.pool(h)) + self.avg(h).repeat_interleave(2, -1)
        return self.amax(h.unsqueeze(1)).flatten(1) + F.adaptive_avg_pool1d(h, 6).sum(1)


@needs_cxx
def test_pool_norm_interpolate_train_under_compile_like_eager(strict_inductor):
    x = kiln.from_numpy(sample((2, 3, 10), "float32", seed=16))
    losses = {}
    for mode in ("eager", "compiled"):
        kiln.manual_seed(0)
        model = PoolNet()
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
    explained = kiln.compiler.explain(PoolNet())(x)
    assert (explained.graph_count, explained.graph_break_count) == (1, 0)


# -- ParameterList, ParameterDict, Bilinear ------------------------------------------------------
def test_parameter_containers_match_torch():
    torch = need_torch()
    for lib in (kiln, torch):
        p = lib.nn.ParameterList([lib.nn.Parameter(lib.ones(2, 3)), lib.zeros(3)])
        p.append(lib.ones(1))
        d = lib.nn.ParameterDict({"a": lib.nn.Parameter(lib.ones(2)), "b": lib.zeros(3, dtype=lib.float64)})
        d["c"] = lib.ones(4)
        assert isinstance(p[1], lib.nn.Parameter) and isinstance(d["b"], lib.nn.Parameter)
        assert len(p) == 3 and len(d) == 3 and "c" in d and list(d) == ["a", "b", "c"]
        assert [tuple(x.shape) for x in p[1:]] == [(3,), (1,)]
        assert d.pop("c").shape == (4,) and list(d.keys()) == ["a", "b"]
        if lib is kiln:
            kp, kd = p, d
        else:
            tp, td = p, d
    assert repr(kp).replace("kiln", "torch") == repr(tp)
    assert repr(kd).replace("kiln", "torch") == repr(td)
    assert list(kp.state_dict()) == list(tp.state_dict()) and list(kd.state_dict()) == list(td.state_dict())
    assert [n for n, _ in kd.named_parameters()] == [n for n, _ in td.named_parameters()]


def test_bilinear_matches_torch():
    torch = need_torch()
    torch.manual_seed(0)
    tm, km = torch.nn.Bilinear(3, 4, 5), nn.Bilinear(3, 4, 5)
    assert repr(km) == repr(tm)
    km.load_state_dict({k: kiln.from_numpy(v.numpy().copy()) for k, v in tm.state_dict().items()})
    grads_match(lambda a, b, w, c: F.bilinear(a, b, w, c),
                lambda a, b, w, c: torch.nn.functional.bilinear(a, b, w, c),
                [sample((2, 6, 3), "float32", seed=20), sample((2, 6, 4), "float32", seed=21),
                 sample((5, 3, 4), "float32", seed=22), sample((5,), "float32", seed=23)], "float64", {})
    for lib in (torch, kiln):
        with pytest.raises(RuntimeError, match="bilinear\\(\\): input batch dimensions do not match at dim 0"):
            lib.nn.functional.bilinear(lib.ones(2, 3), lib.ones(3, 4), lib.ones(5, 3, 4))
        with pytest.raises(RuntimeError, match="input2 size does not match weight size: got 5 but expected 4"):
            lib.nn.functional.bilinear(lib.ones(2, 3), lib.ones(2, 5), lib.ones(5, 3, 4))


class ParamNet(nn.Module):
    def __init__(self):
        super().__init__()
        self.scales = nn.ParameterList([nn.Parameter(kiln.ones(4) * (i + 1)) for i in range(2)])
        self.shift = nn.ParameterDict({"a": nn.Parameter(kiln.zeros(4))})
        self.bil = nn.Bilinear(4, 4, 3)

    def forward(self, x):
        for s in self.scales:
            x = x * s
        return self.bil(x + self.shift["a"], x)


@needs_cxx
def test_parameter_containers_and_bilinear_compile(strict_inductor):
    x = kiln.from_numpy(sample((5, 4), "float32", seed=24))
    kiln.manual_seed(0)
    model = ParamNet()
    expected = model(x)
    assert_match(kiln.compile(model)(x), expected, rtol=1e-5, atol=1e-5)
    explained = kiln.compiler.explain(model)(x)
    assert (explained.graph_count, explained.graph_break_count) == (1, 0)


# F.unfold / F.fold (kiln/nn/_fold.py), nn.Unfold / nn.Fold.
@pytest.mark.parametrize("shape,kwargs", [
    ((2, 3, 6, 5), dict(kernel_size=3, padding=1)),
    ((2, 3, 6, 5), dict(kernel_size=(2, 3), dilation=(1, 2), stride=(2, 1))),
    ((3, 7, 6), dict(kernel_size=2, stride=2, padding=1)),
    ((1, 2, 5, 5), dict(kernel_size=(3, 1), dilation=2, padding=(2, 0), stride=(1, 3))),
])
def test_unfold_fold_match_torch(shape, kwargs):
    torch = need_torch()
    a = sample(shape, "float32", seed=11)
    k, t = both(a)
    k.requires_grad_(True)
    t.requires_grad_(True)
    ck, ct = F.unfold(k, **kwargs), torch.nn.functional.unfold(t, **kwargs)
    assert_match(ck, ct)
    g = sample(tuple(ct.shape), "float32", seed=12)
    gk, gt = both(g)
    ck.backward(gk)
    ct.backward(gt)
    assert_match(k.grad, t.grad, **TOL32)
    assert_match(F.fold(gk, shape[-2:], **kwargs), torch.nn.functional.fold(gt, shape[-2:], **kwargs), **TOL32)


def test_unfold_fold_modules_errors_and_compile():
    torch = need_torch()
    assert repr(nn.Unfold((2, 3), dilation=2, padding=1, stride=(1, 2))) == \
        repr(torch.nn.Unfold((2, 3), dilation=2, padding=1, stride=(1, 2)))
    assert repr(nn.Fold((4, 4), 2)) == repr(torch.nn.Fold((4, 4), 2))
    for lib in (kiln, torch):
        Fl = lib.nn.functional
        with pytest.raises(RuntimeError, match="calculated shape of the array of sliding blocks"):
            Fl.unfold(lib.ones(1, 1, 2, 2), 3)
        with pytest.raises(RuntimeError, match="to match the calculated number of sliding blocks 2 \\* 2 = 4"):
            Fl.fold(lib.ones(1, 4, 5), (3, 3), 2)
        with pytest.raises(RuntimeError, match="divisible by the product of kernel_size"):
            Fl.fold(lib.ones(1, 5, 4), (3, 3), 2)
    x = kiln.from_numpy(sample((2, 3, 6, 5), "float32", seed=13))

    def overlap_average(x):  # the inpainting idiom: fold of the patches over fold of ones
        return F.fold(F.unfold(x, 2), (6, 5), 2) / F.fold(F.unfold(kiln.ones_like(x), 2), (6, 5), 2)

    np.testing.assert_allclose(kiln.compile(overlap_average)(x).numpy(), x.numpy(), rtol=1e-6, atol=1e-6)


# nn.utils.weight_norm / remove_weight_norm (kiln/nn/utils/weight_norm.py).
def test_weight_norm_matches_torch_and_compiles():
    torch = need_torch()
    w = sample((3, 2, 2), "float32", seed=21)
    x = sample((2, 2, 5), "float32", seed=22)
    outs = {}
    for lib in (kiln, torch):
        conv = lib.nn.Conv1d(2, 3, 2)
        with lib.no_grad():
            conv.weight.copy_(lib.from_numpy(w.copy()))
            conv.bias.zero_()
        lib.nn.utils.weight_norm(conv)
        names = [n for n, _ in conv.named_parameters()]
        y = conv(lib.from_numpy(x.copy()))
        y.square().sum().backward()
        grads = (conv.weight_g.grad.clone(), conv.weight_v.grad.clone())
        with lib.no_grad():
            conv.weight_g.mul_(2)
        y2 = conv(lib.from_numpy(x.copy()))
        lib.nn.utils.remove_weight_norm(conv)
        outs[lib] = (names, tuple(conv.weight_g.shape) if hasattr(conv, "weight_g") else None, y, grads, y2,
                     [n for n, _ in conv.named_parameters()], conv(lib.from_numpy(x.copy())))
        lin = lib.nn.utils.weight_norm(lib.nn.Linear(3, 2), dim=None)
        outs[lib] += (tuple(lin.weight_g.shape),)
    assert_match(outs[kiln], outs[torch], rtol=1e-5, atol=1e-6)
    conv = nn.utils.weight_norm(nn.Conv1d(2, 3, 2))
    with pytest.raises(RuntimeError, match="Cannot register two weight_norm hooks"):
        nn.utils.weight_norm(conv)
    xk = kiln.from_numpy(x)
    np.testing.assert_allclose(kiln.compile(conv)(xk).detach().numpy(), conv(xk).detach().numpy(), rtol=1e-5)
