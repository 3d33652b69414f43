"""Spectral analysis on top of kiln.fft: the window functions (hann, hamming, blackman, bartlett,
kaiser) and the short-time Fourier transform and its inverse (torch.stft / torch.istft).

Everything is written in kiln ops (arange, cos, Tensor.unfold's strided frames, the DFT of
kiln.fft, fold's indexed accumulation for the overlap-add), so it differentiates and traces under
kiln.compile like any other composite. The window values follow PyTorch's formulas step by step
in the window's dtype (arange, scale, cos), so they agree with torch's to the last bit or two."""
import math
import warnings

from . import _C

_ops = _C._ops


# --------------------------------------------------------------------------- windows
def _window_dtype(name, dtype):
    from ._settings import get_default_dtype
    dtype = get_default_dtype() if dtype is None else dtype
    if not dtype.is_floating_point:
        raise RuntimeError(f"{name} expects floating point dtypes, got: {dtype}")
    return dtype


def _window(name, window_length, periodic, dtype, device, layout, requires_grad, formula):
    """The window of `formula(n, dtype, device)` (n points, computed for window_length + 1 and the
    last dropped when periodic), after the checks the window functions share."""
    if layout is not None and str(layout) not in ("torch.strided", "strided", "kiln.strided"):
        raise RuntimeError(f"{name} is implemented for strided tensors only, got: {layout}")
    if not isinstance(window_length, int) or isinstance(window_length, bool):
        raise TypeError(f"{name}(): argument 'window_length' must be int, not {type(window_length).__name__}")
    if window_length < 0:
        raise RuntimeError(f"{name} requires non-negative window_length, got window_length={window_length}")
    dtype = _window_dtype(name, dtype)
    if window_length <= 1:
        w = (_ops.ones if window_length else _ops.empty)([window_length], dtype=dtype, device=device)
    else:
        w = formula(window_length + 1 if periodic else window_length, dtype, device)
        if periodic:
            w = w[:-1]
    if requires_grad:
        w.requires_grad_(True)
    return w


def hamming_window(window_length, periodic=True, alpha=0.54, beta=0.46, *, dtype=None, layout=None, device=None,
                   pin_memory=False, requires_grad=False):
    """alpha - beta * cos(2 pi n / (N - 1)); periodic: computed for N + 1 and the last value dropped."""
    def formula(n, dtype, device):
        return (_ops.arange(n, dtype=dtype, device=device) * (math.pi * 2.0 / (n - 1))).cos() * (-beta) + alpha
    return _window("hamming_window", window_length, periodic, dtype, device, layout, requires_grad, formula)


def hann_window(window_length, periodic=True, *, dtype=None, layout=None, device=None, pin_memory=False,
                requires_grad=False):
    """0.5 - 0.5 * cos(2 pi n / (N - 1)) (hamming_window with alpha = beta = 0.5, as PyTorch's)."""
    def formula(n, dtype, device):
        return (_ops.arange(n, dtype=dtype, device=device) * (math.pi * 2.0 / (n - 1))).cos() * (-0.5) + 0.5
    return _window("hann_window", window_length, periodic, dtype, device, layout, requires_grad, formula)


def blackman_window(window_length, periodic=True, *, dtype=None, layout=None, device=None, pin_memory=False,
                    requires_grad=False):
    """0.42 - 0.5 cos(2 pi n / (N - 1)) + 0.08 cos(4 pi n / (N - 1))."""
    def formula(n, dtype, device):
        w = _ops.arange(n, dtype=dtype, device=device) * (math.pi / (n - 1))
        return (w * 4).cos() * 0.08 - (w * 2).cos() * 0.5 + 0.42
    return _window("blackman_window", window_length, periodic, dtype, device, layout, requires_grad, formula)


def bartlett_window(window_length, periodic=True, *, dtype=None, layout=None, device=None, pin_memory=False,
                    requires_grad=False):
    """The triangle 1 - |2 n / (N - 1) - 1|: 2 n / (N - 1) on the first half, 2 - that on the rest."""
    def formula(n, dtype, device):
        w = _ops.arange(n, dtype=dtype, device=device) * (2.0 / (n - 1))
        first_half = ((n - 1) >> 1) + 1
        return _ops.cat([w[:first_half], 2 - w[first_half:]])
    return _window("bartlett_window", window_length, periodic, dtype, device, layout, requires_grad, formula)


def kaiser_window(window_length, periodic=True, beta=12.0, *, dtype=None, layout=None, device=None,
                  pin_memory=False, requires_grad=False):
    """I0(beta * sqrt(1 - ((n - a) / a)^2)) / I0(beta), a = (N - 1) / 2."""
    from .special import i0

    def formula(n, dtype, device):
        a = (n - 1) / 2.0
        x = (_ops.arange(n, dtype=dtype, device=device) - a) / a
        return (i0((1 - x * x).clamp(min=0).sqrt() * beta) / i0(_ops.full([], beta, dtype=dtype, device=device))).to(dtype)
    return _window("kaiser_window", window_length, periodic, dtype, device, layout, requires_grad, formula)


# --------------------------------------------------------------------------- stft / istft
def _describe(name, x, n_fft, hop_length, win_length, window, extra):
    w = "None" if window is None else f"{_type_name(window)}{{{list(window.shape)}}}"
    return (f"{name}({_type_name(x)}{list(x.shape)}, n_fft={n_fft}, hop_length={hop_length}, "
            f"win_length={win_length}, window={w}{extra}) ")


def _type_name(t):
    return {"float32": "CPUFloatType", "float64": "CPUDoubleType", "complex64": "CPUComplexFloatType",
            "complex128": "CPUComplexDoubleType"}.get(str(t.dtype).split(".")[-1], str(t.dtype))


def _padded_window(window, win_length, n_fft, like):
    """The window centred in n_fft samples (zeros either side when win_length < n_fft)."""
    if window is None:
        window = _ops.ones([win_length], dtype=_real_of(like.dtype), device=like.device)
    if win_length < n_fft:
        left = (n_fft - win_length) // 2
        window = _ops.constant_pad_nd(window, [left, n_fft - win_length - left], 0.0)
    return window


def _real_of(dtype):
    if dtype == _C.complex128:
        return _C.float64
    if dtype == _C.complex64:
        return _C.float32
    return dtype


def stft(input, n_fft, hop_length=None, win_length=None, window=None, center=True, pad_mode="reflect",
         normalized=False, onesided=None, return_complex=None, align_to_window=None):
    """torch.stft: frames of n_fft samples every hop_length, each multiplied by the window and
    Fourier transformed: (B?, n_fft // 2 + 1 (onesided) or n_fft, n_frames), complex."""
    from . import fft
    from .nn import functional as F
    if not isinstance(input, _C.TensorBase):
        raise TypeError(f"stft(): argument 'input' must be Tensor, not {type(input).__name__}")
    if center and align_to_window is not None:
        raise RuntimeError("stft align_to_window should only be set when center = false")
    hop = n_fft >> 2 if hop_length is None else hop_length
    win = n_fft if win_length is None else win_length
    complex_in = input.dtype.is_complex or (window is not None and window.dtype.is_complex)
    if return_complex is None:
        if not complex_in:
            raise RuntimeError("stft requires the return_complex parameter be given for real inputs, and will "
                               "further require that return_complex=True in a future PyTorch release.")
        return_complex = True
    if not return_complex:
        warnings.warn("stft with return_complex=False is deprecated. In a future pytorch release, stft will return "
                      "complex tensors for all inputs, and return_complex=False will raise an error.\nNote: you "
                      "can still call torch.view_as_real on the complex output to recover the old return format.")
    if window is None:
        warnings.warn("A window was not provided. A rectangular window will be applied,which is known to cause "
                      "spectral leakage. Other windows such as torch.hann_window or torch.hamming_window are "
                      "recommended to reduce spectral leakage.To suppress this warning and use a rectangular "
                      "window, explicitly set `window=torch.ones(n_fft, device=<device>)`.")
    what = lambda: _describe("stft", input, n_fft, hop, win, window,  # noqa: E731
                             f", normalized={int(normalized)}, onesided={onesided}, return_complex={return_complex}")
    if window is not None and window.device != input.device:
        raise RuntimeError(f"stft input and window must be on the same device but got self on {input.device} "
                           f"and window on {window.device}")
    if not (input.dtype.is_floating_point or input.dtype.is_complex):
        raise RuntimeError(what() + ": expected a tensor of floating point or complex values")
    if input.dim() not in (1, 2):
        raise RuntimeError(what() + ": expected a 1D or 2D tensor")
    x = input.unsqueeze(0) if input.dim() == 1 else input
    if center:
        pad = n_fft // 2
        x = F.pad(x.unsqueeze(0), [pad, pad], mode=pad_mode).squeeze(0)
    length = x.shape[1]
    if n_fft <= 0 or n_fft > length:
        raise RuntimeError(what() + f": expected 0 < n_fft < {length}, but got n_fft={n_fft}")
    if hop <= 0:
        raise RuntimeError(what() + f": expected hop_length > 0, but got hop_length={hop}")
    if win <= 0 or win > n_fft:
        raise RuntimeError(what() + f": expected 0 < win_length <= n_fft, but got win_length={win}")
    if window is not None and (window.dim() != 1 or window.shape[0] != win):
        raise RuntimeError(what() + f": expected a 1D window tensor of size equal to win_length={win}, but got "
                           f"window with size {list(window.shape)}")
    if window is not None or win < n_fft:
        w = _padded_window(window, win, n_fft, input)
    else:
        w = None
    if not center and align_to_window:  # frames start where the window's non-zero part does
        x = x[:, (n_fft - win) // 2:]
    frames = x.unfold(1, n_fft, hop)  # (B, n_frames, n_fft), a strided view
    if w is not None:
        frames = frames * w
    complex_fft = frames.dtype.is_complex
    sided = (not complex_fft) if onesided is None else onesided
    if complex_fft and sided:
        raise RuntimeError("Cannot have onesided output if window or input is complex")
    norm = "ortho" if normalized else "backward"
    if complex_fft:
        out = fft.fft(frames, dim=-1, norm=norm)
    elif sided:
        out = fft.rfft(frames, dim=-1, norm=norm)
    else:
        out = fft.fft(frames, dim=-1, norm=norm)
    out = out.transpose(1, 2)
    if input.dim() == 1:
        out = out.squeeze(0)
    return out if return_complex else _ops.view_as_real(out)


def istft(input, n_fft, hop_length=None, win_length=None, window=None, center=True, normalized=False,
          onesided=None, length=None, return_complex=False):
    """torch.istft: the inverse of stft by windowed overlap-add, divided by the overlap-added
    squared window (which must stay above 1e-11 everywhere: the NOLA condition)."""
    from . import fft
    from .nn import functional as F
    if not isinstance(input, _C.TensorBase):
        raise TypeError(f"istft(): argument 'input' must be Tensor, not {type(input).__name__}")
    hop = n_fft >> 2 if hop_length is None else hop_length
    win = n_fft if win_length is None else win_length
    if window is None:
        warnings.warn("A window was not provided. A rectangular window will be applied.Please provide the same "
                      "window used by stft to make the inversion lossless.To suppress this warning and use a "
                      "rectangular window, explicitly set `window=torch.ones(n_fft, device=<device>)`.")
    what = lambda: _describe("istft", input, n_fft, hop, win, window,  # noqa: E731
                             f", center={int(center)}, normalized={int(normalized)}, onesided={onesided}, "
                             f"length={length}, return_complex={int(return_complex)}")
    if window is not None and window.device != input.device:
        raise RuntimeError(f"istft input and window must be on the same device but got self on {input.device} "
                           f"and window on {window.device}")
    if not input.dtype.is_complex:
        raise RuntimeError("istft requires a complex-valued input tensor matching the output from stft with "
                           "return_complex=True.")
    if input.numel() == 0:
        raise RuntimeError(what() + ": input tensor cannot be empty.")
    if input.dim() not in (2, 3):
        raise RuntimeError(what() + f": expected a tensor with 3 or 4 dimensions, but got {input.dim() + 1}")
    n_frames, fft_size = input.shape[-1], input.shape[-2]
    sided = (fft_size != n_fft) if onesided is None else onesided
    if sided and n_fft // 2 + 1 != fft_size:
        raise RuntimeError(what() + ": expected the frequency dimension (3rd to the last) of the input tensor to "
                           f"match n_fft / 2 + 1 when onesided=True, but got {fft_size}")
    if not sided and n_fft != fft_size:
        raise RuntimeError(what() + ": expected the frequency dimension (3rd to the last) of the input tensor to "
                           f"match n_fft when onesided=False, but got {fft_size}")
    if not 0 < hop <= win:
        raise RuntimeError(what() + ": expected 0 < hop_length <= win_length")
    if not 0 < win <= n_fft:
        raise RuntimeError(what() + ": expected 0 < win_length <= n_fft")
    if window is not None and (window.dim() != 1 or window.shape[0] != win):
        raise RuntimeError(what() + ": Invalid window shape. window has to be 1D and length of `win_length`")
    w = _padded_window(window, win, n_fft, input)
    spec = input.unsqueeze(0) if input.dim() == 2 else input
    spec = spec.transpose(1, 2)  # (B, n_frames, fft_size)
    norm = "ortho" if normalized else "backward"
    if return_complex:
        if sided:
            raise RuntimeError("Cannot have onesided output if window or input is complex")
        frames = fft.ifft(spec, dim=-1, norm=norm)
    else:
        if window is not None and window.dtype.is_complex:
            raise RuntimeError("Complex windows are incompatible with return_complex=False")
        if not sided:
            spec = spec[..., :n_fft // 2 + 1]
        frames = fft.irfft(spec, n=n_fft, dim=-1, norm=norm)
    frames = frames * w  # (B, n_frames, n_fft)
    expected = n_fft + hop * (n_frames - 1)

    def overlap_add(v):  # (B, n_frames, n_fft) -> (B, expected)
        return F.fold(v.transpose(1, 2), (1, expected), (1, n_fft), stride=(1, hop)).reshape([v.shape[0], expected])

    if frames.dtype.is_complex:
        y = _ops.complex(overlap_add(_ops.real(frames).contiguous()), overlap_add(_ops.imag(frames).contiguous()))
    else:
        y = overlap_add(frames)
    envelope = overlap_add((w * w).expand([1, n_frames, n_fft]))
    start = n_fft // 2 if center else 0
    if length is not None:
        end = start + length
    else:
        end = expected - n_fft // 2 if center else expected
    y = y[:, start:min(end, expected)]
    envelope = envelope[:, start:min(end, expected)]
    # (A traced envelope (meta, under kiln.compile) has no values: as one_hot's range check, the
    # NOLA check is then left to eager calls; a window that breaks it gives inf/nan there.)
    if envelope.numel() and not envelope.is_meta and bool(envelope.abs().min() < 1e-11):
        raise RuntimeError(what() + "window overlap add min: 1")
    y = y / envelope
    if input.dim() == 2:
        y = y.squeeze(0)
    if end > expected:
        warnings.warn("The length of signal is shorter than the length parameter. Result is being padded with "
                      "zeros in the tail. Please check your center and hop_length settings.")
        y = _ops.constant_pad_nd(y, [0, end - expected], 0.0)
    return y


def install(namespace, tensor_class):
    for fn in (hann_window, hamming_window, blackman_window, bartlett_window, kaiser_window, stft, istft):
        namespace[fn.__name__] = fn
    tensor_class.stft = stft
    tensor_class.istft = istft
