"""3-d convolution (direct and transposed), 3-d pooling, BatchNorm3d/InstanceNorm3d and 5-d
interpolation against PyTorch: values, dtypes, gradients, errors, and kiln.compile."""
import numpy as np
import pytest

import kiln
from kiln import nn
from kiln.nn import functional as F
from oracle import assert_match, both, need_torch, sample

TOL = {"float32": dict(rtol=1e-4, atol=1e-4), "float64": dict(rtol=1e-10, atol=1e-10)}


def pair(shape, dtype="float64", seed=0, low=-2, high=2):
    return both(sample(shape, dtype, seed, low, high), dtype)


def grads(kx, tx, kout, tout, seed=9):
    """Backward of the same random cotangent through both; returns the kiln and torch outputs."""
    g = sample(tuple(tout.shape), str(tout.dtype).split(".")[-1], seed)
    kg, tg = both(g)
    kout.backward(kg)
    tout.backward(tg)


# (input, weight, bias, stride, padding, dilation, groups)
CONV3D = [
    ((2, 3, 5, 6, 4), (4, 3, 3, 2, 2), True, 1, 0, 1, 1),
    ((1, 4, 6, 5, 7), (6, 2, 2, 3, 3), True, (2, 1, 2), (1, 0, 1), (1, 2, 1), 2),
    ((2, 4, 4, 4, 4), (4, 1, 3, 3, 3), False, 2, 1, 1, 4),       # depthwise, strided, padded
    ((2, 3, 3, 4, 5), (5, 3, 1, 1, 1), True, 1, 0, 1, 1),        # 1x1x1: multiplies the input directly
    ((3, 5, 4, 6), (2, 3, 2, 2, 2), True, 1, "same", 1, 1),      # unbatched, 'same'
    ((1, 2, 7, 5, 6), (3, 2, 3, 2, 3), True, 1, "same", (2, 1, 1), 1),
    ((0, 3, 4, 4, 4), (2, 3, 2, 2, 2), True, 1, 0, 1, 1),        # empty batch
]


@pytest.mark.parametrize("case", range(len(CONV3D)))
@pytest.mark.parametrize("dtype", ["float32", "float64"])
def test_conv3d_forward_and_gradients(case, dtype):
    torch = need_torch()
    xs, ws, has_bias, stride, padding, dilation, groups = CONV3D[case]
    kx, tx = pair(xs, dtype, 1)
    kw, tw = pair(ws, dtype, 2)
    kb, tb = pair((ws[0],), dtype, 3) if has_bias else (None, None)
    for t in (kx, tx, kw, tw) + ((kb, tb) if has_bias else ()):
        t.requires_grad_(True)
    kout = F.conv3d(kx, kw, kb, stride, padding, dilation, groups)
    tout = torch.nn.functional.conv3d(tx, tw, tb, stride, padding, dilation, groups)
    assert_match(kout, tout, **TOL[dtype])
    grads(kx, tx, kout, tout)
    assert_match(kx.grad, tx.grad, **TOL[dtype])
    assert_match(kw.grad, tw.grad, **TOL[dtype])
    if has_bias:
        assert_match(kb.grad, tb.grad, **TOL[dtype])


# (input, weight [cin, cout/groups, k...], stride, padding, output_padding, groups, dilation)
CONV_T3D = [
    ((2, 4, 3, 4, 3), (4, 3, 3, 2, 2), 1, 0, 0, 1, 1),
    ((1, 4, 3, 3, 4), (4, 2, 3, 3, 2), (2, 1, 2), (1, 0, 1), (1, 0, 1), 2, 1),
    ((2, 2, 3, 3, 3), (2, 3, 2, 2, 2), 2, 0, 0, 1, (2, 1, 1)),
]


@pytest.mark.parametrize("case", range(len(CONV_T3D)))
def test_conv_transpose3d_forward_and_gradients(case):
    torch = need_torch()
    xs, ws, stride, padding, output_padding, groups, dilation = CONV_T3D[case]
    kx, tx = pair(xs, seed=4)
    kw, tw = pair(ws, seed=5)
    kb, tb = pair((ws[1] * groups,), seed=6)
    for t in (kx, tx, kw, tw, kb, tb):
        t.requires_grad_(True)
    kout = F.conv_transpose3d(kx, kw, kb, stride, padding, output_padding, groups, dilation)
    tout = torch.nn.functional.conv_transpose3d(tx, tw, tb, stride, padding, output_padding, groups, dilation)
    assert_match(kout, tout, **TOL["float64"])
    grads(kx, tx, kout, tout)
    for k, t in ((kx, tx), (kw, tw), (kb, tb)):
        assert_match(k.grad, t.grad, **TOL["float64"])


def test_conv3d_low_precision_and_integer_dtypes():
    torch = need_torch()
    for dtype in ("bfloat16", "float16"):
        kx, tx = both(sample((1, 2, 4, 4, 4), "float32", 1), "float32")
        kw, tw = both(sample((3, 2, 2, 2, 2), "float32", 2), "float32")
        kt, tt = getattr(kiln, dtype), getattr(torch, dtype)
        kout = F.conv3d(kx.to(kt), kw.to(kt))
        tout = torch.nn.functional.conv3d(tx.to(tt), tw.to(tt))
        assert kout.dtype == kt
        np.testing.assert_allclose(kout.float().numpy(), tout.float().numpy(), rtol=2e-2, atol=5e-2)
    kx, tx = both(sample((1, 2, 4, 4, 4), "int64", 1))
    kw, tw = both(sample((3, 2, 2, 2, 2), "int64", 2))
    assert_match(F.conv3d(kx, kw, dilation=(1, 2, 1)), torch.nn.functional.conv3d(tx, tw, dilation=(1, 2, 1)))


def test_conv3d_modules_match_torch_after_the_same_seed():
    torch = need_torch()
    kiln.manual_seed(0)
    torch.manual_seed(0)
    km = nn.Conv3d(2, 4, (3, 2, 2), stride=(1, 2, 1), padding=1, bias=True)
    tm = torch.nn.Conv3d(2, 4, (3, 2, 2), stride=(1, 2, 1), padding=1, bias=True)
    assert_match(km.weight, tm.weight)
    assert_match(km.bias, tm.bias)
    kx, tx = pair((2, 2, 5, 6, 4), "float32")
    assert_match(km(kx), tm(tx), **TOL["float32"])
    kiln.manual_seed(1)
    torch.manual_seed(1)
    km = nn.Conv3d(2, 3, 3, padding=1, padding_mode="replicate")
    tm = torch.nn.Conv3d(2, 3, 3, padding=1, padding_mode="replicate")
    assert_match(km(kx), tm(tx), **TOL["float32"])
    kiln.manual_seed(2)
    torch.manual_seed(2)
    km = nn.ConvTranspose3d(2, 3, 2, stride=2)
    tm = torch.nn.ConvTranspose3d(2, 3, 2, stride=2)
    assert_match(km(kx, output_size=[11, 13, 9]), tm(tx, output_size=[11, 13, 9]), **TOL["float32"])
    assert repr(km) == repr(tm).replace("torch.", "kiln.")


@pytest.mark.parametrize("call", [
    lambda F, x, w: F.conv3d(x, w[:, :2]),                       # channel mismatch
    lambda F, x, w: F.conv3d(x[0, 0], w),                         # 3-d input
    lambda F, x, w: F.conv3d(x, w, stride=(1, 2)),                # stride of two values
    lambda F, x, w: F.conv3d(x[:, :, :1], w),                     # kernel larger than the input
    lambda F, x, w: F.conv3d(x.bool(), w.bool()),                 # bool
    lambda F, x, w: F.conv3d(x, w.double()),                      # dtype mismatch
])
def test_conv3d_errors_match_torch(call):
    torch = need_torch()
    kx, tx = pair((1, 3, 4, 4, 4), "float32")
    kw, tw = pair((2, 3, 2, 2, 2), "float32")
    with pytest.raises(Exception) as want:
        call(torch.nn.functional, tx, tw)
    with pytest.raises(type(want.value)) as got:
        call(F, kx, kw)
    # kiln's message is torch's after the op's name (a dtype mismatch words it as torch's conv2d does).
    assert str(want.value) in str(got.value) or "Input type (kiln.FloatTensor) and weight type " \
        "(kiln.DoubleTensor) should be the same" in str(got.value)


# ---------------------------------------------------------------- pooling

MAXPOOL = [  # (input, kernel, stride, padding, dilation, ceil_mode)
    ((2, 3, 5, 6, 7), 2, None, 0, 1, False),
    ((2, 3, 5, 6, 7), 3, 2, 1, 1, True),
    ((1, 2, 7, 6, 5), (3, 2, 2), (2, 1, 2), (1, 1, 0), (2, 1, 1), False),
    ((3, 6, 5, 4), (2, 3, 2), 1, 0, (1, 1, 2), True),              # unbatched
]


@pytest.mark.parametrize("case", range(len(MAXPOOL)))
def test_max_pool3d_values_indices_and_gradient(case):
    torch = need_torch()
    shape, k, s, p, d, ceil = MAXPOOL[case]
    # Few distinct values: ties, whose first position (in d, h, w order) torch picks.
    kx, tx = both(np.round(sample(shape, "float64", 3, -2, 2)))
    kx.requires_grad_(True)
    tx.requires_grad_(True)
    kv, ki = F.max_pool3d(kx, k, s, p, d, ceil, return_indices=True)
    tv, ti = torch.nn.functional.max_pool3d(tx, k, s, p, d, ceil, return_indices=True)
    assert_match(kv, tv)
    assert_match(ki, ti)
    grads(kx, tx, kv, tv)
    assert_match(kx.grad, tx.grad)


def test_max_pool3d_nan_and_integers():
    torch = need_torch()
    a = sample((1, 2, 4, 4, 4), "float32", 1)
    a[0, 0, 1, 2, 3] = np.nan
    a[0, 1, 0, 0, 0] = np.nan
    a[0, 1, 1, 1, 1] = np.nan
    kx, tx = both(a)
    kv, ki = F.max_pool3d(kx, 2, return_indices=True)
    tv, ti = torch.nn.functional.max_pool3d(tx, 2, return_indices=True)
    assert_match(kv, tv)
    assert_match(ki, ti)
    kx, tx = both(sample((2, 2, 4, 5, 6), "int32", 2))
    assert_match(F.max_pool3d(kx, (2, 3, 2), ceil_mode=True), torch.nn.functional.max_pool3d(tx, (2, 3, 2),
                                                                                              ceil_mode=True))


AVGPOOL = [  # (input, kernel, stride, padding, ceil_mode, count_include_pad, divisor_override)
    ((2, 3, 5, 6, 7), 2, None, 0, False, True, None),
    ((2, 3, 5, 6, 7), 3, 2, 1, True, True, None),
    ((2, 3, 5, 6, 7), 3, 2, 1, True, False, None),
    ((1, 2, 7, 6, 5), (3, 2, 2), (2, 1, 2), (1, 1, 0), False, False, None),
    ((3, 6, 5, 4), (2, 3, 2), 1, (1, 1, 0), True, True, 5),        # unbatched, divisor
]


@pytest.mark.parametrize("case", range(len(AVGPOOL)))
def test_avg_pool3d_values_and_gradient(case):
    torch = need_torch()
    shape, k, s, p, ceil, include, divisor = AVGPOOL[case]
    kx, tx = pair(shape, seed=case)
    kx.requires_grad_(True)
    tx.requires_grad_(True)
    kv = F.avg_pool3d(kx, k, s, p, ceil, include, divisor)
    tv = torch.nn.functional.avg_pool3d(tx, k, s, p, ceil, include, divisor)
    assert_match(kv, tv, **TOL["float64"])
    grads(kx, tx, kv, tv)
    assert_match(kx.grad, tx.grad, **TOL["float64"])


def test_avg_pool3d_integers_round_as_torch():
    torch = need_torch()
    kx, tx = both(sample((1, 2, 5, 5, 5), "int64", 4, -9, 9))
    for args in ((2,), (3, 2, 1, True, False), (2, 1, 1, False, True, 3)):
        assert_match(F.avg_pool3d(kx, *args), torch.nn.functional.avg_pool3d(tx, *args))


@pytest.mark.parametrize("out", [2, (3, 2, 4), (None, 1, 5), (7, 6, 5)])
def test_adaptive_pools_3d(out):
    torch = need_torch()
    kx, tx = pair((2, 3, 5, 6, 4), seed=7)
    for k, t in ((kx, tx), (kx[0], tx[0])):
        k = k.detach().requires_grad_(True)
        t = t.detach().requires_grad_(True)
        kv = F.adaptive_avg_pool3d(k, out)
        tv = torch.nn.functional.adaptive_avg_pool3d(t, out)
        assert_match(kv, tv, **TOL["float64"])
        grads(k, t, kv, tv)
        assert_match(k.grad, t.grad, **TOL["float64"])
        kv, ki = F.adaptive_max_pool3d(k.detach(), out, return_indices=True)
        tv, ti = torch.nn.functional.adaptive_max_pool3d(t.detach(), out, return_indices=True)
        assert_match(kv, tv)
        assert_match(ki, ti)


def test_pool3d_modules():
    torch = need_torch()
    kx, tx = pair((2, 3, 6, 5, 4), "float32", 8)
    for name, args in (("MaxPool3d", (3, 2, 1)), ("AvgPool3d", (2, 1, 1, True, False)), ("AdaptiveAvgPool3d", (2,)),
                       ("AdaptiveMaxPool3d", ((2, 3, 1),))):
        assert_match(getattr(nn, name)(*args)(kx), getattr(torch.nn, name)(*args)(tx), **TOL["float32"])


@pytest.mark.parametrize("call", [
    lambda F, x: F.max_pool3d(x[0, 0], 2),                         # 3-d input
    lambda F, x: F.max_pool3d(x, 2, padding=2),                    # pad over half the kernel
    lambda F, x: F.max_pool3d(x, (2, 2)),                          # two kernel sizes
    lambda F, x: F.max_pool3d(x, 7),                               # output too small
    lambda F, x: F.max_pool3d(x, 3, padding=2, dilation=2),        # pad over half the (undilated) kernel
    lambda F, x: F.max_pool3d(x, 2, dilation=0),
    lambda F, x: F.max_pool3d(x[:, :, :0], 2),                     # empty spatial dim
    lambda F, x: F.max_pool3d(x.bool(), 2),
    lambda F, x: F.avg_pool3d(x, 7),                               # input smaller than the kernel
    lambda F, x: F.avg_pool3d(x, 2, stride=(1, 2)),
    lambda F, x: F.avg_pool3d(x, 2, padding=-1),
    lambda F, x: F.avg_pool3d(x, 2, divisor_override=0),
    lambda F, x: F.avg_pool3d(x.half(), 2),
    lambda F, x: F.adaptive_avg_pool3d(x.long(), 2),
    lambda F, x: F.adaptive_avg_pool3d(x[0, 0], 2),
    lambda F, x: F.adaptive_avg_pool3d(x, (2, 3)),
    lambda F, x: F.adaptive_max_pool3d(x[:, :, :0], 2),
])
def test_pool3d_errors_match_torch(call):
    torch = need_torch()
    kx, tx = pair((2, 3, 5, 6, 7), "float32")
    with pytest.raises(Exception) as want:
        call(torch.nn.functional, tx)
    with pytest.raises(type(want.value)) as got:
        call(F, kx)
    # torch names the empty dim "non-batch dimension 0" whichever it is; kiln names the real one.
    assert str(got.value).split(" and non-batch")[0] == str(want.value).split(" and non-batch")[0]


# ---------------------------------------------------------------- norms, interpolation

def test_batch_norm3d_and_instance_norm3d():
    torch = need_torch()
    kx, tx = pair((2, 3, 4, 3, 5), "float32", 11)
    for name, kwargs in (("BatchNorm3d", {}), ("InstanceNorm3d", {"affine": True, "track_running_stats": True})):
        km, tm = getattr(nn, name)(3, **kwargs), getattr(torch.nn, name)(3, **kwargs)
        assert_match(km(kx), tm(tx), **TOL["float32"])
        assert_match(km.running_mean, tm.running_mean, **TOL["float32"])
        assert_match(km.running_var, tm.running_var, **TOL["float32"])
        km.eval()
        tm.eval()
        assert_match(km(kx), tm(tx), **TOL["float32"])
    with pytest.raises(ValueError, match="expected 5D input"):
        nn.BatchNorm3d(3)(kx[0])
    assert_match(nn.InstanceNorm3d(3)(kx[0]), torch.nn.InstanceNorm3d(3)(tx[0]), **TOL["float32"])


@pytest.mark.parametrize("mode", ["nearest", "trilinear", "area", "nearest-exact"])
def test_interpolate_5d(mode):
    torch = need_torch()
    kx, tx = pair((1, 2, 3, 4, 5), seed=12)
    for kwargs in ({"size": (5, 3, 7)}, {"scale_factor": 2}):
        if mode == "trilinear":
            kwargs["align_corners"] = False
        assert_match(F.interpolate(kx, mode=mode, **kwargs), torch.nn.functional.interpolate(tx, mode=mode, **kwargs),
                     **TOL["float64"])


# ---------------------------------------------------------------- compiled

def test_conv3d_network_compiles_without_breaks():
    torch = need_torch()
    kiln.manual_seed(0)
    torch.manual_seed(0)

    def build(T):
        return T.nn.Sequential(T.nn.Conv3d(2, 4, 3, padding=1), T.nn.BatchNorm3d(4), T.nn.ReLU(),
                               T.nn.MaxPool3d(2), T.nn.Conv3d(4, 4, 2), T.nn.AdaptiveAvgPool3d(1),
                               T.nn.Flatten(), T.nn.Linear(4, 3))

    km, tm = build(kiln), build(torch)
    km.load_state_dict({k: kiln.from_numpy(v.detach().numpy().copy()) for k, v in tm.state_dict().items()})
    kx, tx = pair((2, 2, 6, 6, 6), "float32", 13)
    compiled = kiln.compile(km)
    kout = compiled(kx)
    assert_match(kout, tm(tx), **TOL["float32"])
    kout.sum().backward()
    tm(tx).sum().backward()
    assert_match(km[0].weight.grad, tm[0].weight.grad, rtol=1e-3, atol=1e-4)
    explain = kiln.explain(km)(kx)
    assert explain.graph_break_count == 0, explain.break_reasons
