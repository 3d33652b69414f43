"""Regression tests for what the second conformance sweep (test/programs/*, session 15) found:
PackedSequence through the RNNs, bicubic interpolation, cov/corrcoef, exact FFT twiddles,
memory formats, and a compiled backward that lost in-place writes into a constant."""
import numpy as np
import pytest

import kiln
from kiln import nn

F = nn.functional


def _np(t):
    return t.detach().numpy()


# -- a compiled backward whose zeros are written through views and then read by a fallback ------
def test_compiled_grad_through_complex_view_of_a_permuted_tensor():
    # The backward writes each select's gradient into zeros (copy_ into a view) and reads the sum
    # in view_as_complex, an eager step: the zeros ran eagerly, and a compiled segment reading
    # them made fresh zeros instead of taking the written ones (the gradient came back all 0).
    def fn(k):
        x = kiln.view_as_complex(kiln.stack([k, k * 2], -1))
        p = kiln.view_as_real(kiln.movedim(x, 0, -1))
        loss = (p[..., 0] * 2 - p[..., 1] * 3).square().sum()
        return kiln.autograd.grad(loss, [k])[0]

    k = kiln.tensor([1.0, 2.0, 3.0], requires_grad=True)
    want = _np(fn(k))
    np.testing.assert_allclose(want, [32.0, 64.0, 96.0])
    kiln.compiler.reset()
    np.testing.assert_allclose(_np(kiln.compile(fn)(k)), want)


def test_compiled_grad_of_fft_convolution_equals_eager():
    def fn(u, k):
        y = kiln.fft.irfft(kiln.fft.rfft(u, n=16) * kiln.fft.rfft(k, n=16), n=16)[..., :8]
        return y, kiln.autograd.grad(y.square().sum(), [k])[0]

    r = np.random.default_rng(0)
    u = kiln.from_numpy(r.standard_normal((2, 8)).astype(np.float32))
    k = kiln.from_numpy(r.standard_normal(8).astype(np.float32)).requires_grad_()
    want = fn(u, k)
    kiln.compiler.reset()
    got = kiln.compile(fn)(u, k)
    for a, b in zip(want, got):
        np.testing.assert_allclose(_np(b), _np(a), rtol=1e-4, atol=1e-4)
    # the direct convolution is the reference
    direct = np.array([np.convolve(row, _np(k))[:8] for row in _np(u)])
    np.testing.assert_allclose(_np(want[0]), direct, rtol=1e-4, atol=1e-4)


# -- fft ------------------------------------------------------------------------------------------
def test_fft_of_real_signal_has_exact_zero_imaginary_parts_at_dc_and_nyquist():
    x = kiln.tensor([[-1.0, -2.0, -0.5, -3.0, -1.5, -2.5], [1.0, -2.0, 3.0, 0.5, 2.0, -1.0]])
    s = kiln.fft.fft(x)
    im = _np(kiln.view_as_real(s))[..., 1]
    assert (im[:, 0] == 0).all() and (im[:, 3] == 0).all()
    assert not np.signbit(im[:, [0, 3]]).any()  # +0, so a negative value's angle is pi
    np.testing.assert_allclose(_np(s), np.fft.fft(_np(x)), atol=1e-5)
    edge = np.where(np.fft.fft(_np(x)).real[:, [0, 3]] < 0, np.pi, 0.0)
    assert (edge == np.pi).any()
    np.testing.assert_allclose(_np(s.angle())[:, [0, 3]], edge, atol=1e-6)
    np.testing.assert_allclose(_np(kiln.fft.rfft(x).angle())[:, [0, 3]], edge, atol=1e-6)


# -- cov / corrcoef -------------------------------------------------------------------------------
def test_cov_and_corrcoef_match_numpy():
    r = np.random.default_rng(1)
    a = r.standard_normal((3, 7))
    fw = np.array([1, 2, 1, 3, 1, 1, 2])
    aw = r.uniform(size=7)
    x = kiln.from_numpy(a)
    np.testing.assert_allclose(_np(kiln.cov(x)), np.cov(a), rtol=1e-10)
    np.testing.assert_allclose(_np(x.cov(correction=0)), np.cov(a, ddof=0), rtol=1e-10)
    got = kiln.cov(x, fweights=kiln.from_numpy(fw), aweights=kiln.from_numpy(aw))
    np.testing.assert_allclose(_np(got), np.cov(a, fweights=fw, aweights=aw), rtol=1e-10)
    np.testing.assert_allclose(_np(kiln.corrcoef(x)), np.corrcoef(a), rtol=1e-10)
    one = kiln.cov(kiln.tensor([1.0, 2.0, 4.0]))
    assert one.dim() == 0 and abs(one.item() - 7 / 3) < 1e-6
    assert kiln.cov(kiln.tensor([[1, 2, 3], [2, 5, 1]])).dtype == kiln.float32


def test_cov_rejects_bad_arguments():
    with pytest.raises(RuntimeError, match="two or fewer dimensions"):
        kiln.cov(kiln.ones(2, 2, 2))
    with pytest.raises(RuntimeError, match="integral dtype"):
        kiln.cov(kiln.ones(2, 3), fweights=kiln.ones(3))
    with pytest.raises(RuntimeError, match="one dimension and 3 elements"):
        kiln.cov(kiln.ones(2, 3), aweights=kiln.ones(4))


# -- bicubic interpolation -------------------------------------------------------------------------
@pytest.mark.parametrize("kw", [dict(size=(9, 13)), dict(size=(3, 4)), dict(scale_factor=2),
                                dict(scale_factor=1.7, align_corners=True), dict(size=(12, 4), align_corners=True)])
def test_bicubic_interpolate_matches_torch(kw):
    torch = pytest.importorskip("torch")
    x = np.random.default_rng(2).standard_normal((2, 3, 5, 6)).astype(np.float32)
    want = torch.nn.functional.interpolate(torch.from_numpy(x), mode="bicubic", **kw).numpy()
    got = F.interpolate(kiln.from_numpy(x), mode="bicubic", **kw)
    np.testing.assert_allclose(_np(got), want, rtol=1e-5, atol=1e-5)


def test_bicubic_reproduces_a_ramp_inside_and_needs_4d_input():
    # the cubic kernel reproduces a linear ramp exactly away from the clamped edges
    ramp = kiln.arange(8.0).reshape(1, 1, 1, 8).expand(1, 1, 4, 8).contiguous()
    up = F.interpolate(ramp, size=(4, 15), mode="bicubic", align_corners=True)
    np.testing.assert_allclose(_np(up)[0, 0, 0, 2:13], np.linspace(0, 7, 15)[2:13], atol=1e-5)
    with pytest.raises(NotImplementedError, match="bicubic mode needs 4D input"):
        F.interpolate(kiln.ones(1, 2, 5), scale_factor=2, mode="bicubic")
    assert nn.Upsample(scale_factor=2, mode="bicubic")(kiln.ones(1, 1, 3, 3)).shape == (1, 1, 6, 6)


# -- PackedSequence ------------------------------------------------------------------------------
def test_pack_and_pad_round_trip_in_original_order():
    rnn_utils = nn.utils.rnn
    x = kiln.arange(24.0).reshape(4, 3, 2)  # [B, T, *]
    packed = rnn_utils.pack_padded_sequence(x, kiln.tensor([2, 3, 1, 2]), batch_first=True, enforce_sorted=False)
    assert packed.batch_sizes.tolist() == [4, 3, 1]
    assert packed.sorted_indices.tolist() == [1, 0, 3, 2]
    assert packed.unsorted_indices.tolist() == [1, 0, 3, 2]
    padded, lengths = rnn_utils.pad_packed_sequence(packed, batch_first=True, total_length=4)
    assert lengths.tolist() == [2, 3, 1, 2] and padded.shape == (4, 4, 2)
    mask = (kiln.arange(4)[None, :] < lengths[:, None])[..., None]
    want = kiln.cat([x, kiln.zeros(4, 1, 2)], 1) * mask
    np.testing.assert_array_equal(_np(padded), _np(want))
    seqs = [kiln.ones(3, 2), kiln.ones(1, 2) * 2, kiln.ones(2, 2) * 3]
    back = rnn_utils.unpack_sequence(rnn_utils.pack_sequence(seqs, enforce_sorted=False))
    assert [_np(s).tolist() for s in back] == [_np(s).tolist() for s in seqs]


def test_pack_padded_sequence_errors():
    rnn_utils = nn.utils.rnn
    with pytest.raises(RuntimeError, match="sorted in decreasing order"):
        rnn_utils.pack_padded_sequence(kiln.ones(3, 2, 1), [1, 2])
    with pytest.raises(RuntimeError, match="greater than 0"):
        rnn_utils.pack_padded_sequence(kiln.ones(3, 2, 1), [2, 0])
    with pytest.raises(ValueError, match="total_length"):
        rnn_utils.pad_packed_sequence(rnn_utils.pack_padded_sequence(kiln.ones(3, 2, 1), [3, 2]), total_length=2)


@pytest.mark.parametrize("cls,kw", [("LSTM", dict(num_layers=2, bidirectional=True)),
                                    ("GRU", dict(bidirectional=True)), ("RNN", dict(num_layers=2)),
                                    ("LSTM", dict(proj_size=3, bidirectional=True))])
def test_rnn_on_packed_sequence_matches_torch(cls, kw):
    torch = pytest.importorskip("torch")
    r = np.random.default_rng(3)
    x = r.standard_normal((4, 6, 5)).astype(np.float32)
    results = []
    for T in (torch, kiln):
        m = getattr(T.nn, cls)(5, 4, batch_first=True, **kw)
        with T.no_grad():
            for i, p in enumerate(m.parameters()):
                p.copy_(T.from_numpy(np.random.default_rng(i).standard_normal(tuple(p.shape)).astype(np.float32) * 0.3))
        xi = T.from_numpy(x.copy()).requires_grad_()
        packed = T.nn.utils.rnn.pack_padded_sequence(xi, T.tensor([3, 6, 2, 5]), batch_first=True,
                                                     enforce_sorted=False)
        out, h = m(packed)
        padded, _ = T.nn.utils.rnn.pad_packed_sequence(out, batch_first=True)
        h = h[0] if isinstance(h, tuple) else h
        (padded.sum() + h.square().sum()).backward()
        results.append([out.data.detach().numpy(), padded.detach().numpy(), h.detach().numpy(), xi.grad.numpy()])
    for want, got in zip(*results):
        np.testing.assert_allclose(got, want, rtol=1e-5, atol=1e-6)


# -- memory formats ------------------------------------------------------------------------------
def test_channels_last_strides_and_values():
    x = kiln.randn(2, 3, 4, 5)
    c = x.contiguous(memory_format=kiln.channels_last)
    assert tuple(c.stride()) == (60, 1, 15, 3)
    assert c.is_contiguous(memory_format=kiln.channels_last) and not c.is_contiguous()
    assert c.contiguous(memory_format=kiln.channels_last) is c
    assert tuple(x.to(memory_format=kiln.channels_last).stride()) == (60, 1, 15, 3)
    assert tuple(x.clone(memory_format=kiln.channels_last).stride()) == (60, 1, 15, 3)
    assert tuple(c.contiguous().stride()) == (60, 20, 5, 1)
    assert tuple(c.clone().stride()) == (60, 1, 15, 3)  # preserve_format
    assert tuple(c.clone(memory_format=kiln.contiguous_format).stride()) == (60, 20, 5, 1)
    np.testing.assert_array_equal(_np(c), _np(x))
    v = kiln.randn(1, 2, 3, 4, 5).contiguous(memory_format=kiln.channels_last_3d)
    assert tuple(v.stride()) == (120, 1, 40, 10, 2)
    with pytest.raises(RuntimeError, match="required rank 4 tensor to use channels_last format"):
        kiln.ones(2, 3).contiguous(memory_format=kiln.channels_last)
    with pytest.raises(TypeError, match="memory_format must be"):
        x.contiguous(memory_format="channels_last")


def test_module_to_channels_last_converts_4d_weights_only():
    conv = nn.Sequential(nn.Conv2d(3, 4, 3), nn.BatchNorm2d(4))
    x = kiln.randn(2, 3, 6, 6)
    want = conv(x)
    conv.to(memory_format=kiln.channels_last)
    assert conv[0].weight.is_contiguous(memory_format=kiln.channels_last)
    assert isinstance(conv[0].weight, nn.Parameter) and conv[0].weight.requires_grad
    assert conv[0].bias.is_contiguous()
    got = conv(x.contiguous(memory_format=kiln.channels_last))
    np.testing.assert_allclose(_np(got), _np(want), rtol=1e-5, atol=1e-5)
    kiln.compiler.reset()
    compiled = kiln.compile(lambda t: conv(t.contiguous(memory_format=kiln.channels_last)))
    np.testing.assert_allclose(_np(compiled(x)), _np(want), rtol=1e-5, atol=1e-5)


# -- objects made while tracing, live at a graph break or returned ------------------------------
class _Box:
    def __init__(self, x, scale):
        self.x = x * scale
        self.scale = scale
        self.me = self


def test_object_made_in_compiled_code_survives_a_graph_break():
    def fn(x):
        box = _Box(x, 2.0)
        dist = kiln.distributions.Normal(x, x.abs() + 1)
        print("break")
        return box.x + 1, box.scale, box.me is box, dist.log_prob(x), dist.entropy()

    x = kiln.randn(4)
    want = fn(x)
    kiln.compiler.reset()
    e = kiln.explain(fn)(x)
    assert (e.graph_count, e.graph_break_count) == (2, 1), e.break_reasons
    kiln.compiler.reset()
    got = kiln.compile(fn)(x)
    for a, b in zip(want, got):
        if isinstance(a, kiln.Tensor):
            np.testing.assert_allclose(_np(b), _np(a), rtol=1e-6)
        else:
            assert a == b


def test_object_made_in_compiled_code_can_be_returned():
    def fn(x):
        return _Box(x, 3.0)

    kiln.compiler.reset()
    e = kiln.explain(fn)(kiln.ones(2))
    assert (e.graph_count, e.graph_break_count, len(e.break_reasons)) == (1, 0, 0), e.break_reasons
    kiln.compiler.reset()
    box = kiln.compile(fn)(kiln.ones(2))
    assert type(box) is _Box and box.me is box and box.scale == 3.0
    np.testing.assert_array_equal(_np(box.x), [3.0, 3.0])
    assert kiln.compile(fn)(kiln.ones(2)) is not box  # a new object per call, as eager


# -- saved-tensor hooks and checkpointing without reentrance -------------------------------------
def test_saved_tensors_hooks_pack_and_unpack_every_saved_tensor():
    packed, unpacked = [], []

    def pack(t):
        packed.append(t.shape)
        return ("kept", t.clone())

    def unpack(kept):
        unpacked.append(kept[0])
        return kept[1]

    x = kiln.randn(3, 4, requires_grad=True)
    w = kiln.randn(4, 2, requires_grad=True)
    with kiln.autograd.graph.saved_tensors_hooks(pack, unpack):
        y = (x @ w).tanh()
    assert packed  # matmul saves its operands, tanh its result
    gx, gw = kiln.autograd.grad(y.sum(), [x, w])
    assert len(unpacked) == len(packed)
    t = (x @ w).tanh()
    want = kiln.autograd.grad(t.sum(), [x, w])
    np.testing.assert_allclose(_np(gx), _np(want[0]), rtol=1e-6)
    np.testing.assert_allclose(_np(gw), _np(want[1]), rtol=1e-6)
    with kiln.autograd.graph.saved_tensors_hooks(lambda t: t, lambda k: "not a tensor"):
        z = x.sin()
    with pytest.raises(TypeError, match="unpack_hook expected to be a Tensor"):
        z.sum().backward()


def test_checkpoint_without_reentrant_serves_autograd_grad_of_parameters():
    # The parameters a checkpointed block uses get gradients from autograd.grad (they were not
    # inputs of the checkpoint's node: "appears to not have been used in the graph").
    block = nn.Sequential(nn.Linear(6, 8), nn.GELU(), nn.Linear(8, 6))
    calls = []

    def fn(a):
        calls.append(1)
        return a + block(a)

    x = kiln.randn(4, 6, requires_grad=True)
    want = kiln.autograd.grad(fn(x).square().sum(), [x, block[0].weight, block[2].bias])
    calls.clear()
    out = kiln.utils.checkpoint.checkpoint(fn, x, use_reentrant=False)
    got = kiln.autograd.grad(out.square().sum(), [x, block[0].weight, block[2].bias])
    assert len(calls) == 2  # the forward, and once more in the backward
    for a, b in zip(want, got):
        np.testing.assert_allclose(_np(b), _np(a), rtol=1e-5, atol=1e-6)
    other = nn.Linear(6, 6)
    seq = kiln.utils.checkpoint.checkpoint_sequential(nn.Sequential(block, nn.Tanh(), other), 2, x,
                                                      use_reentrant=False)
    g, = kiln.autograd.grad(seq.sum(), [block[0].weight])
    w = kiln.autograd.grad(other(block(x).tanh()).sum(), [block[0].weight])[0]
    np.testing.assert_allclose(_np(g), _np(w), rtol=1e-5, atol=1e-6)


class _Block(nn.Module):
    def __init__(self):
        super().__init__()
        self.lin = nn.Linear(4, 4)

    def forward(self, x):
        return x + self.lin(x).tanh()


def test_checkpoint_in_compiled_code_and_compiled_code_in_a_checkpoint():
    block = _Block()
    x = kiln.randn(3, 4, requires_grad=True)

    def fn(x):
        h = kiln.utils.checkpoint.checkpoint(block, x, use_reentrant=False)
        return kiln.autograd.grad(h.square().sum(), [x, block.lin.weight])

    want = fn(x)
    kiln.compiler.reset()
    e = kiln.explain(fn)(x)
    assert e.graph_count == 1 and all("checkpoint" not in str(r) for r in e.break_reasons), e.break_reasons
    kiln.compiler.reset()
    for a, b in zip(want, kiln.compile(fn)(x)):
        np.testing.assert_allclose(_np(b), _np(a), rtol=1e-5, atol=1e-6)
    # a compiled module run by an eager checkpoint: compiled while the checkpoint's hooks are on
    kiln.compiler.reset()
    twin = _Block()
    twin.load_state_dict(block.state_dict())
    h = kiln.utils.checkpoint.checkpoint(kiln.compile(twin), x, use_reentrant=False)
    got = kiln.autograd.grad(h.square().sum(), [x, twin.lin.weight])
    for a, b in zip(want, got):
        np.testing.assert_allclose(_np(b), _np(a), rtol=1e-5, atol=1e-6)
