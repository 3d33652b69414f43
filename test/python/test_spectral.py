"""Window functions, torch.stft / torch.istft and the modified Bessel functions I0/I1 (kiln/_spectral.py,
kiln/special.py), against PyTorch, eagerly and compiled (Whisper's log-Mel front end uses
hann_window + stft)."""
import warnings

import numpy as np
import pytest

import kiln

torch = pytest.importorskip("torch")

WINDOWS = ["hann_window", "hamming_window", "blackman_window", "bartlett_window", "kaiser_window"]


@pytest.mark.parametrize("name", WINDOWS)
@pytest.mark.parametrize("n", [0, 1, 2, 5, 64, 401])
@pytest.mark.parametrize("periodic", [True, False])
def test_windows_match_torch(name, n, periodic):
    for tdt, kdt in ((None, None), (torch.float64, kiln.float64)):
        t = getattr(torch, name)(n, periodic, **({"dtype": tdt} if tdt else {})).numpy()
        k = getattr(kiln, name)(n, periodic, **({"dtype": kdt} if kdt else {})).numpy()
        assert k.dtype == t.dtype and k.shape == t.shape
        np.testing.assert_allclose(k, t, atol=1e-6 if tdt is None else 1e-12)


def test_window_errors():
    with pytest.raises(RuntimeError, match="hann_window requires non-negative window_length"):
        kiln.hann_window(-1)
    with pytest.raises(RuntimeError, match="expects floating point dtypes"):
        kiln.hamming_window(4, dtype=kiln.int64)
    w = kiln.hann_window(8, requires_grad=True)
    assert w.requires_grad and w.is_leaf


@pytest.mark.parametrize("fn", ["i0", "i0e", "i1", "i1e"])
@pytest.mark.parametrize("dtype", ["float32", "float64"])
def test_bessel_values_and_gradients(fn, dtype):
    x = np.concatenate([np.linspace(-30, 30, 601), [0.0, 8.0, -8.0, 7.999, 8.001, 1e-8]])
    t = getattr(torch.special, fn)(torch.tensor(x, dtype=getattr(torch, dtype))).numpy()
    k = getattr(kiln.special, fn)(kiln.tensor(x, dtype=getattr(kiln, dtype))).numpy()
    np.testing.assert_allclose(k, t, rtol=2e-6 if dtype == "float32" else 1e-13, atol=1e-30)
    pts = [0.0, 0.5, -3.0, 9.0, -20.0]
    xt = torch.tensor(pts, dtype=torch.float64, requires_grad=True)
    xk = kiln.tensor(pts, dtype=kiln.float64, requires_grad=True)
    (gt,) = torch.autograd.grad(getattr(torch.special, fn)(xt).sum(), xt)
    (gk,) = kiln.autograd.grad(getattr(kiln.special, fn)(xk).sum(), xk)
    np.testing.assert_allclose(gk.numpy(), gt.numpy(), rtol=1e-12, atol=1e-14)
    assert kiln.i0 is kiln.special.i0 and float(kiln.ones(1).i0()) == pytest.approx(1.2660658777520082)


STFT_CASES = [dict(n_fft=64), dict(n_fft=64, hop_length=10, win_length=50), dict(n_fft=400, hop_length=160),
              dict(n_fft=64, center=False), dict(n_fft=64, normalized=True), dict(n_fft=64, onesided=False),
              dict(n_fft=32, pad_mode="constant")]


@pytest.mark.parametrize("case", STFT_CASES)
@pytest.mark.parametrize("windowed", [True, False])
def test_stft_istft_match_torch(case, windowed):
    x = np.random.default_rng(0).standard_normal((2, 1000)).astype(np.float32)
    wl = case.get("win_length", case["n_fft"])
    tw, kw = (torch.hann_window(wl), kiln.hann_window(wl)) if windowed else (None, None)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        ts = torch.stft(torch.from_numpy(x), window=tw, return_complex=True, **case)
        ks = kiln.stft(kiln.from_numpy(x), window=kw, return_complex=True, **case)
        assert tuple(ks.shape) == tuple(ts.shape) and ks.dtype == kiln.complex64
        np.testing.assert_allclose(ks.numpy(), ts.numpy(), atol=5e-5)
        inverse = {k: v for k, v in case.items() if k != "pad_mode"}
        try:
            ti = torch.istft(ts, window=tw, length=1000, **inverse)
        except RuntimeError:  # center=False with a Hann window: the NOLA condition fails
            with pytest.raises(RuntimeError, match="window overlap add min"):
                kiln.istft(ks, window=kw, length=1000, **inverse)
            return
        ki = kiln.istft(ks, window=kw, length=1000, **inverse)
        np.testing.assert_allclose(ki.numpy(), ti.numpy(), atol=5e-6)


def test_stft_errors_and_real_output():
    x = kiln.randn(300)
    with pytest.raises(RuntimeError, match="return_complex parameter be given"):
        kiln.stft(x, 64)
    with pytest.raises(RuntimeError, match="expected a 1D or 2D tensor"):
        kiln.stft(kiln.randn(1, 2, 300), 64, return_complex=True)
    with pytest.raises(RuntimeError, match="expected a 1D window tensor of size equal to win_length=64"):
        kiln.stft(x, 64, window=kiln.ones(10), return_complex=True)
    with pytest.warns(UserWarning, match="return_complex=False is deprecated"):
        real = kiln.stft(x, 64, window=kiln.hann_window(64), return_complex=False)
    assert tuple(real.shape) == (33, 19, 2) and x.stft(64, window=kiln.hann_window(64), return_complex=True).shape == (33, 19)
    with pytest.raises(RuntimeError, match="istft requires a complex-valued input"):
        kiln.istft(real, 64)


def test_log_mel_spectrogram_compiles_to_one_graph_with_gradients():
    # Whisper's front end: |stft|^2 of a Hann-windowed signal, a filter bank, log10 and clamps.
    filters = kiln.rand(80, 201)

    def log_mel(audio):
        window = kiln.hann_window(400)
        stft = kiln.stft(audio, 400, 160, window=window, return_complex=True)
        magnitudes = stft[..., :-1].abs() ** 2
        log_spec = kiln.clamp(filters @ magnitudes, min=1e-10).log10()
        log_spec = kiln.maximum(log_spec, log_spec.max() - 8.0)
        return (log_spec + 4.0) / 4.0

    audio = kiln.randn(3200, requires_grad=True)
    eager = log_mel(audio)
    (g_eager,) = kiln.autograd.grad(eager.sum(), audio)
    explained = kiln.explain(log_mel)(audio)
    assert (explained.graph_count, explained.graph_break_count) == (1, 0), explained.break_reasons
    compiled = kiln.compile(log_mel)(audio)
    (g_compiled,) = kiln.autograd.grad(compiled.sum(), audio)
    np.testing.assert_allclose(compiled.detach().numpy(), eager.detach().numpy(), rtol=1e-5, atol=1e-5)
    np.testing.assert_allclose(g_compiled.numpy(), g_eager.numpy(), rtol=1e-4, atol=1e-4)


def _compiled_grad_matches(fn, x):
    x = x.detach().requires_grad_(True)
    (eager,) = kiln.autograd.grad(fn(x).sum(), x)
    (compiled,) = kiln.autograd.grad(kiln.compile(fn)(x).sum(), x)
    np.testing.assert_allclose(compiled.numpy(), eager.numpy(), rtol=1e-5, atol=1e-5)
    assert float(eager.abs().max()) > 0


@pytest.mark.parametrize("case", ["slice", "slice_abs", "rfft_slice", "rfft_transpose_slice"])
def test_compiled_gradient_through_a_view_of_complex_values(case):
    # Regression: the backward writes the gradient of `z[:, :-1]` (z complex) into zeros through
    # view_as_real(slice(view_as_complex(zeros))); the fallback planner did not follow the complex
    # views, and the compiled backward returned the zeros (all-zero gradients, no error).
    fns = {
        "slice": lambda a: kiln.view_as_real(kiln.view_as_complex(a.reshape(2, 50, 2))[:, :-1]).pow(2),
        "slice_abs": lambda a: kiln.view_as_complex(a.reshape(2, 50, 2))[..., :-1].abs(),
        "rfft_slice": lambda a: kiln.fft.rfft(a.reshape(2, 10, 10), dim=-1)[..., :-1].abs() ** 2,
        "rfft_transpose_slice": lambda a: kiln.fft.rfft(a.unfold(1, 10, 5), dim=-1).transpose(1, 2)[..., :-1].abs() ** 2,
    }
    _compiled_grad_matches(fns[case], kiln.randn(2, 100))
