"""Convolution, pooling, batch/group norm and embedding kernels (forward and backward ops) and
their functionals and modules, against PyTorch."""
import math

import numpy as np
import pytest

import kiln
from kiln import nn
from kiln.nn import functional as F
from oracle import assert_match, both, need_torch, sample

FLOATS = ["float32", "float64"]
TOL = {"float32": dict(rtol=1e-4, atol=1e-4), "float64": dict(rtol=1e-10, atol=1e-10)}


def pair(shape, dtype, seed=0, low=-2, high=2):
    return both(sample(shape, dtype, seed, low, high), dtype)


def close(k, t, dtype):
    assert_match(k, t, **TOL[dtype])


def mask(bits):
    """An output_mask string ("101") as kiln's int[3] and PyTorch's bool[3]."""
    return [int(b) for b in bits], [b == "1" for b in bits]


# ---------------------------------------------------------------- convolution

# (input shape, weight shape, bias, stride, padding, dilation, groups)
CONV2D = [
    ((2, 3, 7, 6), (4, 3, 3, 3), True, 1, 0, 1, 1),
    ((2, 4, 9, 8), (6, 2, 3, 2), True, (2, 1), (1, 2), (1, 2), 2),
    ((1, 6, 8, 8), (6, 1, 3, 3), False, 2, 1, 1, 6),          # depthwise, strided
    ((3, 5, 6, 6), (7, 5, 1, 1), True, 1, 0, 1, 1),           # 1x1: multiplies the input directly
    ((0, 3, 5, 5), (2, 3, 3, 3), True, 1, 1, 1, 1),           # empty batch
    ((4, 5, 6), (2, 4, 2, 2), True, 1, "same", 1, 1),         # unbatched, 'same' with an odd total
    ((1, 2, 7, 6), (3, 2, 3, 2), True, 1, "same", 2, 1),      # dilated 'same'
    ((2, 3, 6, 5), (4, 3, 4, 3), True, 1, "same", 1, 1),      # 'same' with an even kernel
    ((2, 3, 6, 5), (4, 3, 3, 3), False, 1, "valid", 1, 1),
]
CONV1D = [
    ((2, 3, 10), (4, 3, 3), True, 1, 1, 1, 1),
    ((2, 4, 11), (4, 2, 3), True, 2, 2, 2, 2),
    ((3, 9), (5, 3, 4), False, 1, "same", 1, 1),               # unbatched
]


def _conv_case(case, dtype, dims):
    ishape, wshape, has_bias, stride, padding, dilation, groups = case
    (kx, tx), (kw, tw) = pair(ishape, dtype, 1), pair(wshape, dtype, 2)
    kb, tb = pair((wshape[0],), dtype, 3) if has_bias else (None, None)
    kf, tf = (F.conv1d, "conv1d") if dims == 1 else (F.conv2d, "conv2d")
    return (kx, kw, kb), (tx, tw, tb), kf, tf, dict(stride=stride, padding=padding, dilation=dilation, groups=groups)


@pytest.mark.parametrize("dtype", FLOATS)
@pytest.mark.parametrize("dims,case", [(2, c) for c in CONV2D] + [(1, c) for c in CONV1D])
def test_conv_forward(dims, case, dtype):
    torch = need_torch()
    k, t, kf, tname, kw = _conv_case(case, dtype, dims)
    close(kf(*k, **kw), getattr(torch.nn.functional, tname)(*t, **kw), dtype)


@pytest.mark.parametrize("dtype", FLOATS)
@pytest.mark.parametrize("bits", ["111", "100", "010", "011"])
@pytest.mark.parametrize("case", [CONV2D[0], CONV2D[1], CONV2D[2], CONV2D[3], CONV2D[4]])
def test_convolution_backward(case, bits, dtype):
    torch = need_torch()
    ishape, wshape, has_bias, stride, padding, dilation, groups = case
    (kx, tx), (kw, tw) = pair(ishape, dtype, 1), pair(wshape, dtype, 2)
    expand = (lambda v: [v, v]) if isinstance(stride, int) else list
    args = [expand(stride), expand(padding), expand(dilation), False, [0, 0], groups]
    out_shape = tuple(torch.ops.aten.convolution(tx, tw, None, *args).shape)
    kg, tg = pair(out_shape, dtype, 4)
    kmask, tmask = mask(bits)
    bias_sizes = [wshape[0]]
    got = kiln.convolution_backward(kg, kx, kw, bias_sizes, *args, kmask)
    want = torch.ops.aten.convolution_backward(tg, tx, tw, bias_sizes, *args, tmask)
    for g, w, on in zip(got, want, tmask):
        assert (g is not None) == on
        if on:
            close(g, w, dtype)


# float32 convolutions run through oneDNN's primitives, whose blocked kernels take channel counts
# of 8 or 16 and more (smaller ones take its reference kernels): both kinds, against PyTorch.
@pytest.mark.parametrize("case", [
    ((3, 16, 10, 9), (32, 16, 3, 3), True, 1, 1, 1, 1),
    ((2, 32, 9, 9), (64, 8, 3, 3), False, 2, 1, 1, 4),         # grouped, strided
    ((2, 16, 11, 11), (16, 16, 3, 3), True, 1, 2, 2, 1),       # dilated
    ((2, 64, 7, 7), (32, 64, 1, 1), True, 1, 0, 1, 1),         # 1x1
    ((2, 16, 12), (16, 16, 5), True, 2, 2, 1, 1),              # 1-d
])
def test_convolution_float32_blocked_shapes(case):
    torch = need_torch()
    ishape, wshape, has_bias, stride, padding, dilation, groups = case
    (kx, tx), (kw, tw), (kb, tb) = (pair(ishape, "float32", 1), pair(wshape, "float32", 2),
                                    pair(wshape[:1], "float32", 3))
    d = len(ishape) - 2
    args = [[stride] * d, [padding] * d, [dilation] * d, False, [0] * d, groups]
    got = kiln.convolution(kx, kw, kb if has_bias else None, *args)
    want = torch.ops.aten.convolution(tx, tw, tb if has_bias else None, *args)
    assert_match(got, want, rtol=1e-4, atol=2e-4)
    kg, tg = pair(tuple(want.shape), "float32", 4)
    got = kiln.convolution_backward(kg, kx, kw, [wshape[0]], *args, [1, 1, 1])
    want = torch.ops.aten.convolution_backward(tg, tx, tw, [wshape[0]], *args, [True, True, True])
    for g, w in zip(got, want):
        assert_match(g, w, rtol=1e-4, atol=5e-4)
    # Only the input gradient, then only the weight's: the primitives are cached per request.
    gi, gw, _ = kiln.convolution_backward(kg, kx, kw, [wshape[0]], *args, [1, 0, 0])
    assert gw is None
    assert_match(gi, want[0], rtol=1e-4, atol=5e-4)
    gi, gw, _ = kiln.convolution_backward(kg, kx, kw, [wshape[0]], *args, [0, 1, 0])
    assert gi is None
    assert_match(gw, want[1], rtol=1e-4, atol=5e-4)


def test_gemm_libraries_share_kiln_openmp_runtime():
    """kiln's GEMMs are oneDNN and OpenBLAS's OpenMP build: the pthread OpenBLAS (whose threads
    spun against kiln's OpenMP ones) must not be what the process loaded."""
    a = kiln.ones(64, 64)
    (a @ a).sum().item()
    maps = open("/proc/self/maps").read()
    assert "libdnnl" in maps
    # Debian's builds (numpy's wheel may bring an OpenBLAS of its own, elsewhere).
    blas = {line.split()[-1] for line in maps.splitlines()
            if "/usr/lib/x86_64-linux-gnu/openblas" in line}
    assert blas and all("openblas-openmp" in path for path in blas), blas


def test_convolution_backward_conv1d_and_noncontiguous():
    torch = need_torch()
    (kx, tx), (kw, tw) = pair((3, 8, 4), "float64", 1), pair((3, 4, 2), "float64", 2)
    kx, tx = kx.transpose(1, 2), tx.transpose(1, 2)  # [3, 4, 8], strided
    kg, tg = pair((3, 3, 5), "float64", 3)
    args = [[2], [1], [1], False, [0], 1]
    got = kiln.convolution_backward(kg, kx, kw, [3], *args, [1, 1, 1])
    want = torch.ops.aten.convolution_backward(tg, tx, tw, [3], *args, [True, True, True])
    close(got, want, "float64")


def test_conv_half_precision_and_integers():
    torch = need_torch()
    (kx, tx), (kw, tw) = pair((2, 3, 6, 6), "bfloat16", 1), pair((4, 3, 3, 3), "bfloat16", 2)
    assert_match(F.conv2d(kx, kw, padding=1), torch.nn.functional.conv2d(tx, tw, padding=1), rtol=2e-2, atol=5e-2)
    (kx, tx), (kw, tw) = both(sample((2, 3, 5, 5), "int64", 1)), both(sample((2, 3, 2, 2), "int64", 2))
    assert_match(F.conv2d(kx, kw, stride=2), torch.nn.functional.conv2d(tx, tw, stride=2))


def test_conv_meta_shapes():
    x = kiln.empty(2, 3, 10, 9, device="meta")
    w = kiln.empty(8, 3, 3, 3, device="meta")
    out = kiln.convolution(x, w, None, [2, 1], [1, 0], [1, 2], False, [0, 0], 1)
    assert out.device.type == "meta" and tuple(out.shape) == (2, 8, 5, 5)
    gi, gw, gb = kiln.convolution_backward(kiln.empty(2, 8, 5, 5, device="meta"), x, w, [8], [2, 1], [1, 0],
                                           [1, 2], False, [0, 0], 1, [1, 1, 1])
    assert (tuple(gi.shape), tuple(gw.shape), tuple(gb.shape)) == ((2, 3, 10, 9), (8, 3, 3, 3), (8,))


@pytest.mark.parametrize("call,exc,message", [
    (lambda: F.conv2d(kiln.ones(1, 3, 5, 5), kiln.ones(4, 2, 3, 3)), RuntimeError,
     r"Given groups=1, weight of size \[4, 2, 3, 3\], expected input\[1, 3, 5, 5\] to have 2 channels, but got 3"),
    (lambda: F.conv2d(kiln.ones(1, 3, 2, 5), kiln.ones(4, 3, 3, 3)), RuntimeError,
     r"Calculated padded input size per channel: \(2 x 5\). Kernel size: \(3 x 3\)"),
    (lambda: F.conv2d(kiln.ones(1, 3, 5, 5), kiln.ones(4, 3, 3, 3, dtype=kiln.float64)), RuntimeError,
     r"Input type \(kiln.FloatTensor\) and weight type \(kiln.DoubleTensor\) should be the same"),
    (lambda: F.conv2d(kiln.ones(3, 5, 5, 1, 1), kiln.ones(4, 3, 3, 3)), RuntimeError,
     r"Expected 3D \(unbatched\) or 4D \(batched\) input to conv2d, but got input of size: \[3, 5, 5, 1, 1\]"),
    (lambda: F.conv2d(kiln.ones(1, 3, 5, 5), kiln.ones(4, 3, 3, 3), kiln.ones(3)), RuntimeError,
     r"expected bias to be 1-dimensional with 4 elements, but got bias of size \[3\]"),
    (lambda: F.conv2d(kiln.ones(1, 4, 5, 5), kiln.ones(3, 2, 3, 3), groups=2), RuntimeError,
     r"expected weight to be divisible by 2 at dimension 0"),
    (lambda: F.conv2d(kiln.ones(1, 3, 5, 5), kiln.ones(4, 3, 3, 3), stride=0), RuntimeError,
     "non-positive stride is not supported"),
    (lambda: F.conv2d(kiln.ones(1, 3, 5, 5), kiln.ones(4, 3, 3, 3), stride=2, padding="same"), RuntimeError,
     "padding='same' is not supported for strided convolutions"),
    (lambda: F.conv2d(kiln.ones(1, 3, 5, 5, dtype=kiln.int64).bool(), kiln.ones(4, 3, 3, 3).bool()),
     NotImplementedError, "not implemented for 'Bool'"),
    (lambda: kiln.convolution(kiln.ones(1, 3, 5, 5), kiln.ones(4, 3, 3, 3), None, [1, 1], [0, 0], [1, 1], True,
                              [0, 0], 1),
     RuntimeError, r"Given transposed=1, weight of size \[4, 3, 3, 3\], expected input"),
])
def test_conv_errors(call, exc, message):
    with pytest.raises(exc, match=message):
        call()


def test_conv_errors_match_torch_types():
    torch = need_torch()
    for fn in (lambda lib: lib.nn.functional.conv2d(lib.ones(1, 3, 5, 5), lib.ones(4, 2, 3, 3)),
               lambda lib: lib.nn.functional.conv2d(lib.ones(1, 3, 5, 5), lib.ones(4, 3, 3, 3), stride=2,
                                                    padding="same")):
        with pytest.raises(Exception) as theirs:
            fn(torch)
        with pytest.raises(type(theirs.value)):
            fn(kiln)


def copy_params(src, dst):
    with kiln.no_grad():
        for (tn, tp), (kn, kp) in zip(src.named_parameters(), dst.named_parameters()):
            assert tn == kn
            kp.copy_(kiln.from_numpy(tp.detach().numpy().copy()))
        for (tn, tb), (kn, kb) in zip(src.named_buffers(), dst.named_buffers()):
            assert tn == kn
            kb.copy_(kiln.from_numpy(tb.detach().numpy().copy()))


@pytest.mark.parametrize("cls,args,kwargs,ishape", [
    ("Conv2d", (3, 8, 3), dict(), (2, 3, 9, 9)),
    ("Conv2d", (4, 6, (3, 2)), dict(stride=(2, 1), padding=1, dilation=(1, 2), groups=2, bias=False), (2, 4, 9, 9)),
    ("Conv2d", (3, 4, 4), dict(padding="same"), (3, 7, 7)),
    ("Conv1d", (3, 5, 3), dict(padding="valid", stride=2), (2, 3, 11)),
    ("Conv1d", (2, 4, 5), dict(padding=2, bias=False), (2, 9)),
])
def test_conv_modules_match_torch(cls, args, kwargs, ishape):
    torch = need_torch()
    km, tm = getattr(nn, cls)(*args, **kwargs), getattr(torch.nn, cls)(*args, **kwargs)
    assert repr(km) == repr(tm)
    assert [(n, tuple(p.shape)) for n, p in km.named_parameters()] == \
        [(n, tuple(p.shape)) for n, p in tm.named_parameters()]
    assert km._reversed_padding_repeated_twice == list(tm._reversed_padding_repeated_twice)
    copy_params(tm, km)
    kx, tx = pair(ishape, "float32", 5)
    with torch.no_grad():
        close(km(kx), tm(tx), "float32")


def test_conv_module_init_and_arguments():
    kiln.manual_seed(0)
    m = nn.Conv2d(4, 6, 3, groups=2)
    bound = 1 / math.sqrt(2 * 3 * 3)  # fan_in = in_channels / groups * kernel area
    w, b = m.weight.detach().numpy(), m.bias.detach().numpy()
    assert np.abs(w).max() <= bound and np.abs(b).max() <= bound and w.std() > bound / 4
    assert m.weight.requires_grad and m.bias.requires_grad
    with pytest.raises(ValueError, match="in_channels must be divisible by groups"):
        nn.Conv2d(3, 6, 3, groups=2)
    with pytest.raises(ValueError, match="Invalid padding string 'full'"):
        nn.Conv1d(3, 6, 3, padding="full")
    with pytest.raises(ValueError, match="padding_mode must be one of"):
        nn.Conv2d(3, 6, 3, padding_mode="mirror")
    with pytest.raises(ValueError, match="not supported for strided convolutions"):
        nn.Conv2d(3, 6, 3, stride=2, padding="same")


# ---------------------------------------------------------------- pooling

# (input shape, kernel, stride, padding, dilation, ceil_mode)
MAXPOOL = [
    ((2, 3, 8, 8), 2, None, 0, 1, False),
    ((2, 3, 9, 7), 3, 2, 1, 1, True),
    ((1, 2, 10, 11), (3, 2), (2, 3), (1, 1), (2, 1), False),
    ((3, 7, 7), 3, 2, 0, 1, True),                  # unbatched
    ((2, 2, 5, 5), 2, 2, 1, 1, True),               # ceil_mode drops a window that starts in the padding
]


@pytest.mark.parametrize("dtype", FLOATS)
@pytest.mark.parametrize("case", MAXPOOL)
def test_max_pool2d_forward_and_backward(case, dtype):
    torch = need_torch()
    ishape, k, s, p, d, ceil = case
    kx, tx = pair(ishape, dtype, 1)
    kout, kidx = F.max_pool2d(kx, k, s, p, d, ceil_mode=ceil, return_indices=True)
    tout, tidx = torch.nn.functional.max_pool2d(tx, k, s, p, d, ceil_mode=ceil, return_indices=True)
    close(kout, tout, dtype)
    assert_match(kidx, tidx)
    kg, tg = pair(tuple(tout.shape), dtype, 2)
    lst = lambda v: [v, v] if isinstance(v, int) else list(v)  # noqa: E731
    args = [lst(k), [] if s is None else lst(s), lst(p), lst(d), ceil]
    close(kiln.max_pool2d_with_indices_backward(kg, kx, *args, kidx),
          torch.ops.aten.max_pool2d_with_indices_backward(tg, tx, *args, tidx), dtype)


def test_max_pool2d_nan_integers_and_overlap():
    torch = need_torch()
    a = sample((1, 1, 4, 4), "float32", 3)
    a[0, 0, 1, 2] = np.nan
    kx, tx = both(a)
    assert_match(F.max_pool2d(kx, 2, return_indices=True), torch.nn.functional.max_pool2d(tx, 2, return_indices=True))
    kx, tx = both(sample((2, 3, 6, 6), "int32", 4))
    assert_match(F.max_pool2d(kx, 3, 1, return_indices=True), torch.nn.functional.max_pool2d(tx, 3, 1, return_indices=True))
    # overlapping windows share maxima: the backward sums into one input element
    kx, tx = pair((1, 1, 5, 5), "float64", 5)
    kout, kidx = F.max_pool2d(kx, 3, 1, return_indices=True)
    tout, tidx = torch.nn.functional.max_pool2d(tx, 3, 1, return_indices=True)
    close(kiln.max_pool2d_with_indices_backward(kiln.ones_like(kout), kx, [3, 3], [1, 1], [0, 0], [1, 1], False, kidx),
          torch.ops.aten.max_pool2d_with_indices_backward(torch.ones_like(tout), tx, [3, 3], [1, 1], [0, 0], [1, 1],
                                                          False, tidx), "float64")


# (input shape, kernel, stride, padding, ceil_mode, count_include_pad, divisor_override)
AVGPOOL = [
    ((2, 3, 8, 8), 2, None, 0, False, True, None),
    ((2, 3, 9, 7), 3, 2, 1, True, True, None),
    ((2, 3, 9, 7), 3, 2, 1, True, False, None),
    ((1, 2, 7, 6), (3, 2), (2, 1), (1, 1), False, False, 5),
    ((3, 5, 5), 2, 2, 1, True, True, None),
]


@pytest.mark.parametrize("dtype", FLOATS)
@pytest.mark.parametrize("case", AVGPOOL)
def test_avg_pool2d_forward_and_backward(case, dtype):
    torch = need_torch()
    ishape, k, s, p, ceil, cip, div = case
    kx, tx = pair(ishape, dtype, 1)
    kout = F.avg_pool2d(kx, k, s, p, ceil, cip, div)
    tout = torch.nn.functional.avg_pool2d(tx, k, s, p, ceil, cip, div)
    close(kout, tout, dtype)
    kg, tg = pair(tuple(tout.shape), dtype, 2)
    lst = lambda v: [v, v] if isinstance(v, int) else list(v)  # noqa: E731
    args = [lst(k), [] if s is None else lst(s), lst(p), ceil, cip, div]
    close(kiln.avg_pool2d_backward(kg, kx, *args), torch.ops.aten.avg_pool2d_backward(tg, tx, *args), dtype)


@pytest.mark.parametrize("dtype", FLOATS)
@pytest.mark.parametrize("ishape,osize", [((2, 3, 8, 8), (1, 1)), ((2, 3, 7, 9), (3, 4)), ((3, 5, 6), (5, 6)),
                                          ((1, 2, 5, 7), (None, 3)), ((2, 2, 4, 4), 8)])
def test_adaptive_avg_pool2d_forward_and_backward(ishape, osize, dtype):
    torch = need_torch()
    kx, tx = pair(ishape, dtype, 1)
    kout, tout = F.adaptive_avg_pool2d(kx, osize), torch.nn.functional.adaptive_avg_pool2d(tx, osize)
    close(kout, tout, dtype)
    kg, tg = pair(tuple(tout.shape), dtype, 2)
    close(kiln._adaptive_avg_pool2d_backward(kg, kx), torch.ops.aten._adaptive_avg_pool2d_backward(tg, tx), dtype)


@pytest.mark.parametrize("call,message", [
    (lambda lib: lib.nn.functional.max_pool2d(lib.ones(1, 1, 4, 4), 2, padding=2), "pad should be at most half"),
    (lambda lib: lib.nn.functional.max_pool2d(lib.ones(1, 1, 2, 2), 3), "Output size is too small"),
    (lambda lib: lib.nn.functional.max_pool2d(lib.ones(4, 4), 2), "Expected 3D or 4D"),
    (lambda lib: lib.nn.functional.avg_pool2d(lib.ones(1, 1, 4, 4), 2, divisor_override=0), "divisor must be not zero"),
    (lambda lib: lib.nn.functional.avg_pool2d(lib.ones(1, 1, 4, 4), 3, 1, 2), "pad should be"),
    (lambda lib: lib.nn.functional.adaptive_avg_pool2d(lib.ones(1, 0, 4), 2), "non-zero size"),
])
def test_pool_errors(call, message):
    torch = need_torch()
    with pytest.raises(Exception) as theirs:
        call(torch)
    with pytest.raises(type(theirs.value), match=message):
        call(kiln)


def test_pool_modules():
    torch = need_torch()
    kx, tx = pair((2, 3, 9, 9), "float32", 1)
    for name, args, kwargs in [("MaxPool2d", (3,), dict(stride=2, padding=1, ceil_mode=True)),
                               ("MaxPool2d", ((2, 3),), dict(return_indices=True)),
                               ("AvgPool2d", (2,), dict(count_include_pad=False)),
                               ("AdaptiveAvgPool2d", ((2, None),), {})]:
        km, tm = getattr(nn, name)(*args, **kwargs), getattr(torch.nn, name)(*args, **kwargs)
        assert repr(km) == repr(tm)
        close(km(kx), tm(tx), "float32")


# ---------------------------------------------------------------- batch norm

@pytest.mark.parametrize("dtype", FLOATS)
@pytest.mark.parametrize("shape", [(4, 3, 5, 5), (8, 5), (3, 4, 7)])
@pytest.mark.parametrize("training", [True, False])
@pytest.mark.parametrize("affine", [True, False])
def test_native_batch_norm_forward_and_backward(shape, training, affine, dtype):
    torch = need_torch()
    c = shape[1]
    kx, tx = pair(shape, dtype, 1)
    kw, tw = pair((c,), dtype, 2) if affine else (None, None)
    kb, tb = pair((c,), dtype, 3) if affine else (None, None)
    krm, trm = pair((c,), dtype, 4)
    krv, trv = both(sample((c,), dtype, 5, 0.5, 2), dtype)
    kout = kiln.native_batch_norm(kx, kw, kb, krm, krv, training, 0.3, 1e-5)
    tout = torch.ops.aten.native_batch_norm(tx, tw, tb, trm, trv, training, 0.3, 1e-5)
    close(kout, tout, dtype)
    close(krm, trm, dtype)  # running stats updated in place when training (unbiased variance)
    close(krv, trv, dtype)
    kg, tg = pair(shape, dtype, 6)
    ks, ts = (kout[1], kout[2]) if training else (None, None)
    got = kiln.native_batch_norm_backward(kg, kx, kw, krm, krv, ks, ts, training, 1e-5, [1, 1, 1])
    want = torch.ops.aten.native_batch_norm_backward(tg, tx, tw, trm, trv, tout[1] if training else None,
                                                     tout[2] if training else None, training, 1e-5,
                                                     [True, True, True])
    close(got, want, dtype)


def test_native_batch_norm_errors():
    torch = need_torch()
    with pytest.raises(RuntimeError, match="running_mean should contain 3 elements not 4"):
        kiln.native_batch_norm(kiln.ones(2, 3), None, None, kiln.zeros(4), kiln.ones(4), True, 0.1, 1e-5)
    with pytest.raises(RuntimeError, match="weight should contain 3 elements not 2"):
        kiln.native_batch_norm(kiln.ones(2, 3), kiln.ones(2), None, None, None, True, 0.1, 1e-5)
    with pytest.raises(RuntimeError, match="running_mean and running_var must be given"):
        kiln.native_batch_norm(kiln.ones(2, 3), None, None, None, None, False, 0.1, 1e-5)
    for lib in (torch, kiln):  # PyTorch's check in F.batch_norm
        with pytest.raises(ValueError, match="Expected more than 1 value per channel when training"):
            lib.nn.functional.batch_norm(lib.ones(1, 3), None, None, training=True)


@pytest.mark.parametrize("cls,kwargs,shape", [
    ("BatchNorm2d", dict(), (4, 3, 5, 5)),
    ("BatchNorm2d", dict(momentum=None), (4, 3, 5, 5)),
    ("BatchNorm2d", dict(affine=False, eps=1e-3), (2, 3, 4, 4)),
    ("BatchNorm1d", dict(), (6, 4)),
    ("BatchNorm1d", dict(track_running_stats=False), (6, 4, 3)),
    ("BatchNorm2d", dict(bias=False), (2, 3, 4, 4)),
])
def test_batch_norm_modules(cls, kwargs, shape):
    torch = need_torch()
    km, tm = getattr(nn, cls)(shape[1], **kwargs), getattr(torch.nn, cls)(shape[1], **kwargs)
    assert repr(km) == repr(tm)
    assert list(km.state_dict()) == list(tm.state_dict())
    for step in range(3):  # training: batch statistics, running stats and num_batches_tracked advance
        kx, tx = pair(shape, "float32", step)
        close(km(kx), tm(tx), "float32")
    for (n, kb), (_, tb) in zip(km.named_buffers(), tm.named_buffers()):
        assert_match(kb, tb, rtol=1e-5, atol=1e-5)
    km.eval()
    tm.eval()
    kx, tx = pair(shape, "float32", 9)
    close(km(kx), tm(tx), "float32")


def test_batch_norm_module_input_dims():
    with pytest.raises(ValueError, match=r"expected 4D input \(got 3D input\)"):
        nn.BatchNorm2d(3)(kiln.ones(2, 3, 4))
    with pytest.raises(ValueError, match=r"expected 2D or 3D input \(got 4D input\)"):
        nn.BatchNorm1d(3)(kiln.ones(2, 3, 4, 4))
    m = nn.BatchNorm1d(3)
    assert str(m.num_batches_tracked.dtype) == "kiln.int64" and m.num_batches_tracked.item() == 0


# ---------------------------------------------------------------- group norm

@pytest.mark.parametrize("dtype", FLOATS)
@pytest.mark.parametrize("shape,groups,affine", [((2, 6, 4, 4), 3, True), ((3, 4, 5), 2, False),
                                                 ((2, 8), 4, True), ((1, 4, 3, 3), 1, True)])
def test_native_group_norm_forward_and_backward(shape, groups, affine, dtype):
    torch = need_torch()
    n, c = shape[:2]
    hw = int(np.prod(shape[2:]))
    kx, tx = pair(shape, dtype, 1)
    kw, tw = pair((c,), dtype, 2) if affine else (None, None)
    kb, tb = pair((c,), dtype, 3) if affine else (None, None)
    kout = kiln.native_group_norm(kx, kw, kb, n, c, hw, groups, 1e-5)
    tout = torch.ops.aten.native_group_norm(tx, tw, tb, n, c, hw, groups, 1e-5)
    close(kout, tout, dtype)
    close(F.group_norm(kx, groups, kw, kb), torch.nn.functional.group_norm(tx, groups, tw, tb), dtype)
    kg, tg = pair(shape, dtype, 4)
    kmask, tmask = mask("111" if affine else "100")  # PyTorch fails on weight grads without a weight
    got = kiln.native_group_norm_backward(kg, kx, kout[1], kout[2], kw, n, c, hw, groups, kmask)
    want = torch.ops.aten.native_group_norm_backward(tg, tx, tout[1], tout[2], tw, n, c, hw, groups, tmask)
    close(got, want, dtype)


def test_group_norm_module_and_errors():
    torch = need_torch()
    kx, tx = pair((2, 4, 3, 3), "float32", 1)
    for kwargs in (dict(), dict(bias=False), dict(affine=False)):
        km, tm = nn.GroupNorm(2, 4, **kwargs), torch.nn.GroupNorm(2, 4, **kwargs)
        assert repr(km) == repr(tm)
        close(km(kx), tm(tx), "float32")
    with pytest.raises(ValueError, match=r"num_channels \(4\) must be divisible by num_groups \(3\)"):
        nn.GroupNorm(3, 4)
    with pytest.raises(RuntimeError, match="Expected number of channels in input to be divisible by num_groups"):
        F.group_norm(kiln.ones(2, 4, 3), 3)


# ---------------------------------------------------------------- embedding

@pytest.mark.parametrize("dtype", FLOATS)
@pytest.mark.parametrize("idx_dtype", ["int64", "int32"])
def test_embedding_forward_and_backward(dtype, idx_dtype):
    torch = need_torch()
    kw, tw = pair((10, 4), dtype, 1)
    ki, ti = both(np.array([[1, 3, 3, 9], [0, 3, 2, 1]], dtype=idx_dtype))
    close(F.embedding(ki, kw), torch.nn.functional.embedding(ti, tw), dtype)
    close(F.embedding(ki, kw, padding_idx=3), torch.nn.functional.embedding(ti, tw, padding_idx=3), dtype)
    kg, tg = pair((2, 4, 4), dtype, 2)
    for pad, scale in [(-1, False), (3, False), (-1, True), (1, True)]:
        close(kiln.embedding_dense_backward(kg, ki, 10, pad, scale),
              torch.ops.aten.embedding_dense_backward(tg, ti, 10, pad, scale), dtype)


def test_embedding_errors():
    torch = need_torch()
    for lib, exc in ((torch, IndexError), (kiln, IndexError)):
        with pytest.raises(exc, match="index out of range in self"):
            lib.nn.functional.embedding(lib.tensor([0, 5]), lib.ones(5, 2))
        with pytest.raises(exc, match="index out of range in self"):
            lib.nn.functional.embedding(lib.tensor([-1]), lib.ones(5, 2))
    with pytest.raises(RuntimeError, match="'indices' to have one of the following scalar types: Long, Int"):
        F.embedding(kiln.ones(2), kiln.ones(5, 2))
    with pytest.raises(RuntimeError, match="'weight' must be 2-D"):
        kiln.embedding(kiln.ones(5), kiln.tensor([1]))
    with pytest.raises(AssertionError, match="Padding_idx must be within num_embeddings"):
        nn.Embedding(4, 2, padding_idx=4)


def test_embedding_module():
    torch = need_torch()
    kiln.manual_seed(0)
    m = nn.Embedding(6, 3, padding_idx=-2)
    tm = torch.nn.Embedding(6, 3, padding_idx=-2)
    assert repr(m) == repr(tm) and m.padding_idx == 4
    w = m.weight.detach().numpy()
    assert w[4].tolist() == [0.0, 0.0, 0.0] and np.abs(w).sum() > 0
    w = sample((5, 2), "float32", 3)
    km = nn.Embedding.from_pretrained(kiln.from_numpy(w.copy()))
    tm = torch.nn.Embedding.from_pretrained(torch.from_numpy(w.copy()))
    assert not km.weight.requires_grad and repr(km) == repr(tm)
    assert nn.Embedding.from_pretrained(kiln.from_numpy(w.copy()), freeze=False).weight.requires_grad
    ki, ti = both(np.array([4, 0, 4, 2]))
    close(km(ki), tm(ti), "float32")
    # max_norm renormalizes the looked-up rows in place, as torch.embedding_renorm_
    kw, tw = pair((5, 3), "float32", 4)
    close(F.embedding(ki, kw, max_norm=1.0), torch.nn.functional.embedding(ti, tw, max_norm=1.0), "float32")
    close(kw, tw, "float32")


def test_max_pool2d_backward_rejects_indices_outside_the_plane():
    x = kiln.ones(1, 2, 4, 4)
    out, idx = F.max_pool2d(x, 2, return_indices=True)
    bad = idx.clone()
    bad[0, 1, 0, 0] = 16  # one past the 4x4 plane: would write into the next plane
    with pytest.raises(IndexError, match="out of range"):
        kiln.max_pool2d_with_indices_backward(kiln.ones_like(out), x, [2, 2], [2, 2], [0, 0], [1, 1], False, bad)
