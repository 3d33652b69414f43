"""Reductions of patterns from public model code run with `import kiln as torch` (issue 16's
outside-code sweep): each test is a small self-written version of what broke."""
import functools
import warnings

import numpy as np
import pytest

import kiln
from oracle import need_torch


def _channels_last(T, x):
    return T.from_numpy(np.ascontiguousarray(x.transpose(0, 2, 3, 1))).permute(0, 3, 1, 2)


def test_batch_norm_keeps_a_channels_last_layout_as_torch():
    torch = need_torch()
    x = np.random.default_rng(0).standard_normal((2, 4, 5, 5)).astype(np.float32)
    x5 = np.random.default_rng(1).standard_normal((2, 4, 3, 2, 5)).astype(np.float32)
    for training in (True, False):
        got = {}
        for T in (torch, kiln):
            stats = (T.zeros(4), T.ones(4), T.full((4,), 2.0), T.full((4,), 0.5))
            cl = _channels_last(T, x)
            cl5 = T.from_numpy(np.ascontiguousarray(x5.transpose(0, 2, 3, 4, 1))).permute(0, 4, 1, 2, 3)
            outs = [T.nn.functional.batch_norm(v, *stats, training=training)
                    for v in (cl, cl5, T.from_numpy(x).transpose(2, 3), T.from_numpy(x))]
            got[T.__name__] = [(tuple(o.stride()), o.numpy()) for o in outs]
        for (ks, kv), (ts, tv) in zip(got["kiln"], got["torch"]):
            assert ks == ts
            np.testing.assert_allclose(kv, tv, rtol=1e-5, atol=1e-5)


class _ConvBnView(kiln.nn.Module):
    """CvT's depthwise projection: a conv on a channels-last input (an einops rearrange's output),
    batch norm, a 1x1 conv, then a reshape that is a view only for a contiguous tensor (the
    captured graph recorded a view from batch norm's contiguous meta output, and the prims
    retrace, where batch norm's pointwise decomposition kept channels-last, refused it)."""

    def __init__(self):
        super().__init__()
        self.dw = kiln.nn.Conv2d(4, 4, 3, padding=1, groups=4)
        self.bn = kiln.nn.BatchNorm2d(4)
        self.pw = kiln.nn.Conv2d(4, 6, 1)

    def forward(self, x):
        y = self.pw(self.bn(self.dw(x)))
        return y.reshape(y.shape[0] * y.shape[1], -1).softmax(-1)


def test_compiled_view_after_batch_norm_of_a_channels_last_input():
    kiln.manual_seed(0)
    model = _ConvBnView()
    x = _channels_last(kiln, np.random.default_rng(0).standard_normal((2, 4, 6, 6)).astype(np.float32))
    x.requires_grad_(True)
    expected = model(x)
    expected.sum().backward()
    grad = x.grad.clone()
    x.grad = None
    kiln.manual_seed(0)
    compiled = kiln.compile(_ConvBnView(), fullgraph=True)
    with warnings.catch_warnings():
        warnings.simplefilter("error")  # a failed compile falls back to eager with a warning
        out = compiled(x)
        out.sum().backward()
    np.testing.assert_allclose(out.detach().numpy(), expected.detach().numpy(), rtol=1e-5, atol=1e-6)
    np.testing.assert_allclose(x.grad.numpy(), grad.numpy(), rtol=1e-4, atol=1e-6)


def _scale_axes(x, scales):
    # vit-pytorch's RvT: an index tuple built with the builtin Ellipsis.
    return x * scales[(*((None,) * (len(x.shape) - 1)), Ellipsis)]


_PHASE = 0.5 + 0.25j  # a complex module constant, guarded as a constant


def _with_phase(x):
    return x * _PHASE.real + _PHASE.imag


def test_ellipsis_and_complex_globals_compile_in_one_graph():
    x, s = kiln.randn(3, 2), kiln.randn(2)
    for fn, args, expected in ((_scale_axes, (x, s), x * s[None, :]), (_with_phase, (x,), x * 0.5 + 0.25)):
        explained = kiln.explain(fn)(*args)
        assert (explained.graph_count, explained.graph_break_count) == (1, 0), explained.break_reasons
        kiln.compiler.reset()
        np.testing.assert_allclose(kiln.compile(fn, fullgraph=True)(*args).numpy(), expected.numpy(), rtol=1e-6)


@kiln.amp.autocast("cuda", enabled=False)
def _rotate_half(x):
    # RvT's and many rotary-embedding helpers: autocast as a decorator, disabled for precision.
    x1, x2 = x.chunk(2, dim=-1)
    return kiln.cat((-x2, x1), dim=-1)


@kiln.autocast("cpu", dtype=kiln.bfloat16)
def _low_precision_mm(a, b):
    return a @ b


def test_autocast_used_as_a_decorator_compiles_without_a_break():
    x = kiln.randn(4, 6)

    def disabled(t):
        return _rotate_half(t) * 2

    def enabled(t):
        return _low_precision_mm(t, t.t()).float() + 1

    for fn in (disabled, enabled):
        explained = kiln.explain(fn)(x)
        assert (explained.graph_count, explained.graph_break_count) == (1, 0), explained.break_reasons
        kiln.compiler.reset()
        out = kiln.compile(fn, fullgraph=True)(x)
        np.testing.assert_allclose(out.numpy(), fn(x).numpy(), rtol=1e-2 if fn is enabled else 1e-6)
    assert _low_precision_mm(x, x.t()).dtype == kiln.bfloat16


def test_dropout_classes_share_torchs_hierarchy():
    # mnist_rnn's Dropout2d: code that switches off `isinstance(m, nn.Dropout)` layers must leave
    # Dropout1d/2d/3d and the alpha dropouts alone, as torch's hierarchy (_DropoutNd) does.
    torch = need_torch()
    names = ["Dropout", "Dropout1d", "Dropout2d", "Dropout3d", "AlphaDropout", "FeatureAlphaDropout"]
    for name in names:
        k, t = getattr(kiln.nn, name), getattr(torch.nn, name)
        assert issubclass(k, kiln.nn.Dropout) == issubclass(t, torch.nn.Dropout), name
        assert [c.__name__ for c in k.__mro__[:2]] == [c.__name__ for c in t.__mro__[:2]]
        assert repr(k(0.25)) == repr(t(0.25))


def test_sync_batch_norm_without_a_process_group_is_batch_norm():
    # timm subclasses nn.SyncBatchNorm at import time (SyncBatchNormAct).
    torch = need_torch()
    x = np.random.default_rng(0).standard_normal((4, 3, 5)).astype(np.float32)
    got = {}
    for T in (torch, kiln):
        T.manual_seed(0)
        model = T.nn.Sequential(T.nn.Conv1d(3, 3, 1), T.nn.BatchNorm1d(3))
        model = T.nn.SyncBatchNorm.convert_sync_batchnorm(model)
        assert type(model[1]).__name__ == "SyncBatchNorm"
        y = model(T.from_numpy(x))
        got[T.__name__] = (y.detach().numpy(), model[1].running_var.numpy(), repr(model))
        with pytest.raises(ValueError, match="expected at least 2D input"):
            model[1](T.ones(3))

        class Act(T.nn.SyncBatchNorm):
            pass

        assert Act(3).process_group is None
    np.testing.assert_allclose(got["kiln"][0], got["torch"][0], rtol=1e-5, atol=1e-5)
    np.testing.assert_allclose(got["kiln"][1], got["torch"][1], rtol=1e-5)
    assert got["kiln"][2] == got["torch"][2]


def test_data_classes_are_generic_as_torchs():
    # timm: `class ScheduledBatchSampler(Sampler[List[Tuple[Any, int]]])` at import time.
    from typing import List

    D = kiln.utils.data

    class Pairs(D.Sampler[List[int]]):
        def __iter__(self):
            return iter([[0, 1], [2]])

    class Items(D.Dataset[int]):
        def __getitem__(self, i):
            return i * 10

        def __len__(self):
            return 3

    assert [b.tolist() for b in D.DataLoader(Items(), batch_sampler=Pairs())] == [[0, 10], [20]]
    for cls in (D.IterableDataset, D.Subset, D.ConcatDataset, D.DataLoader):
        assert cls[int].__origin__ is cls


def test_jit_annotations_names():
    # timm's DenseNet: `from torch.jit.annotations import List`.
    from typing import List

    from kiln.jit.annotations import BroadcastingList2, Dict, Optional, Tuple  # noqa: F401
    from kiln.jit.annotations import List as JitList

    assert JitList is List and BroadcastingList2[int] == List[int]


@pytest.mark.parametrize("transpose", [False, True])
def test_fuse_conv_bn_eval_equals_conv_then_bn(transpose):
    # timm's EfficientViM imports torch.nn.utils.fusion.fuse_conv_bn_eval.
    kiln.manual_seed(0)
    conv = (kiln.nn.ConvTranspose2d(3, 4, 3) if transpose else kiln.nn.Conv2d(3, 4, 3, bias=False)).eval()
    bn = kiln.nn.BatchNorm2d(4).eval()
    with kiln.no_grad():
        bn.running_mean.uniform_(-1, 1)
        bn.running_var.uniform_(0.5, 2)
        bn.weight.uniform_(0.5, 1.5)
        bn.bias.uniform_(-1, 1)
    x = kiln.randn(2, 3, 6, 6)
    fused = kiln.nn.utils.fusion.fuse_conv_bn_eval(conv, bn, transpose=transpose)
    np.testing.assert_allclose(fused(x).detach().numpy(), bn(conv(x)).detach().numpy(), rtol=1e-5, atol=1e-5)
    assert isinstance(fused.weight, kiln.nn.Parameter) and fused is not conv
    linear, bn1 = kiln.nn.Linear(5, 4).eval(), kiln.nn.BatchNorm1d(4).eval()
    with kiln.no_grad():
        bn1.running_var.fill_(2.0)
    v = kiln.randn(3, 5)
    np.testing.assert_allclose(kiln.nn.utils.fuse_linear_bn_eval(linear, bn1)(v).detach().numpy(),
                               bn1(linear(v)).detach().numpy(), rtol=1e-5, atol=1e-6)
    with pytest.raises(AssertionError, match="Fusion only for eval"):
        kiln.nn.utils.fuse_conv_bn_eval(conv.train(), bn)


_CAT_ROWS = functools.partial(kiln.cat, dim=0)  # a partial made outside the compiled frame


def _default(val, d):
    # denoising-diffusion-pytorch's helper: `d` is often a lambda made in the compiled frame.
    if val is not None:
        return val
    return d() if callable(d) else d


def _memory_attention(q, k, v, mem):
    # denoising-diffusion-pytorch's Attention: partial(torch.cat, dim=...) mapped over pairs.
    mk, mv = map(lambda t: t.expand(q.shape[0], -1, -1), mem)
    k, v = map(functools.partial(kiln.cat, dim=-2), ((mk, k), (mv, v)))
    clip = functools.partial(kiln.clamp, min=-1.0)
    scores = clip(q @ k.transpose(-1, -2), max=1.0)
    noise = _default(None, lambda: kiln.zeros_like(q))
    return _CAT_ROWS((scores.softmax(-1) @ v + noise, _default(q, 0.0))), callable(clip), callable(q)


def test_functools_partial_and_callable_compile_in_one_graph():
    q, k, v = kiln.randn(2, 3, 4), kiln.randn(2, 5, 4), kiln.randn(2, 5, 4)
    mem = kiln.randn(2, 1, 2, 4)
    expected = _memory_attention(q, k, v, mem)
    explained = kiln.explain(_memory_attention)(q, k, v, mem)
    assert (explained.graph_count, explained.graph_break_count) == (1, 0), explained.break_reasons
    kiln.compiler.reset()
    out, clip_callable, tensor_callable = kiln.compile(_memory_attention, fullgraph=True)(q, k, v, mem)
    assert (clip_callable, tensor_callable) == (True, False) == expected[1:]
    np.testing.assert_allclose(out.numpy(), expected[0].numpy(), rtol=1e-5, atol=1e-6)


def test_partial_binds_like_functools():
    # keywords of the call override the bound ones; a partial of a partial binds both.
    def f(a, b, c=0, d=0):
        return a * 1000 + b * 100 + c * 10 + d

    def g(x):
        p = functools.partial(f, 1, c=2)
        pp = functools.partial(p, 3, d=4)
        return x + p(5, c=6) + pp() + pp(c=7)

    x = kiln.zeros(1)
    kiln.compiler.reset()
    assert kiln.compile(g, fullgraph=True)(x).item() == g(x).item() == 1560 + 1324 + 1374
