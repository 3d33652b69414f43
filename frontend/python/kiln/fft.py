"""kiln.fft (torch.fft): discrete Fourier transforms as plain DFTs.

Each 1-D transform multiplies the signal's (re, im) parts by the real cosine and sine matrices
of its length (O(n^2) per transform, any length, no radix-2 special case), so it runs on every
device, differentiates, and traces as real ops (docs/complex.md). The angles are reduced mod n in
integers and evaluated in float64 before the cast to the signal's precision, which keeps large n
as accurate as torch's pocketfft within float32 tolerance. The n-dimensional transforms apply the
1-D ones dim by dim. norm: "backward" (torch's default: the inverse scales by 1/n), "ortho"
(both by 1/sqrt(n)) or "forward" (the forward transform scales by 1/n).
"""
import math

from . import _C

_ops = _C._ops

__all__ = ["fft", "ifft", "rfft", "irfft", "fftn", "ifftn", "rfftn", "fft2", "ifft2", "rfft2",
           "fftfreq", "rfftfreq", "fftshift", "ifftshift"]


def _real_dtype(t):
    if t.dtype.is_complex:
        return _C.float64 if t.dtype == _C.complex128 else _C.float32
    return _C.float64 if t.dtype == _C.float64 else _C.float32


def _scale(n, norm, inverse):
    if norm in (None, "backward"):
        return 1.0 / n if inverse else 1.0
    if norm == "ortho":
        return 1.0 / math.sqrt(n)
    if norm == "forward":
        return 1.0 if inverse else 1.0 / n
    raise ValueError(f"Invalid normalization mode: {norm}")


def _cos_sin(n_in, n_out, dtype, device):
    """cos and sin of 2*pi*j*k/n_in for j < n_in (rows) and k < n_out (columns)."""
    j = _ops.arange(n_in, dtype=_C.int64, device=device).unsqueeze(1)
    k = _ops.arange(n_out, dtype=_C.int64, device=device).unsqueeze(0)
    r = _ops.remainder(j * k, n_in)
    angle = r.to(_C.float64) * (2 * math.pi / n_in)
    # Exact at the half and quarter turns (float64 sin(pi) is 1.2e-16, not 0): a real signal's
    # zero and Nyquist frequencies then have imaginary part 0, as pocketfft's, and their angle
    # is torch's (pi, not -pi, for a negative value).
    sin = _ops.where(r * 2 == n_in, 0.0, _ops.sin(angle))
    sin = _ops.where(r * 4 == n_in, 1.0, _ops.where(r * 4 == 3 * n_in, -1.0, sin))
    cos = _ops.where((r * 4 == n_in) | (r * 4 == 3 * n_in), 0.0, _ops.cos(angle))
    cos = _ops.where(r * 2 == n_in, -1.0, cos)
    return cos.to(dtype), sin.to(dtype)


def _resized(x, n, dim):
    """x along dim trimmed or zero-padded to n (torch's `n=`)."""
    size = x.shape[dim]
    if n is None or n == size:
        return x
    if n < 1:
        raise RuntimeError(f"Invalid number of data points ({n}) specified")
    if n < size:
        return _ops.narrow(x, dim, 0, n)
    pad = list(x.shape)
    pad[dim] = n - size
    return _ops.cat([x, _ops.zeros(pad, dtype=x.dtype, device=x.device)], dim)


def _parts(x, dtype):
    if x.dtype.is_complex:
        pairs = _ops.view_as_real(x)
        return _ops.select(pairs, -1, 0).to(dtype), _ops.select(pairs, -1, 1).to(dtype)
    return x.to(dtype), None


def _complex(re, im):
    return _ops.view_as_complex(_ops.stack([re, im], -1))


def _dft(x, n, dim, norm, inverse, n_out=None):
    """The DFT of x along dim (trimmed or padded to n) keeping the first n_out frequencies."""
    dim = dim % max(x.dim(), 1)
    x = _resized(x, n, dim)
    n = x.shape[dim]
    dtype = _real_dtype(x)
    c, s = _cos_sin(n, n_out or n, dtype, x.device)
    if not inverse:
        s = -s  # e^{-i theta} forward, e^{+i theta} inverse
    re, im = _parts(_ops.movedim(x, dim, -1), dtype)
    out_re, out_im = re @ c, re @ s
    if im is not None:
        out_re, out_im = out_re - im @ s, out_im + im @ c
    else:
        out_im = out_im + 0.0  # the exact zeros of a real signal are +0, as pocketfft's (angle pi)
    out = _complex(out_re, out_im) * _scale(n, norm, inverse)
    return _ops.movedim(out, -1, dim)


def fft(input, n=None, dim=-1, norm=None):
    return _dft(input, n, dim, norm, inverse=False)


def ifft(input, n=None, dim=-1, norm=None):
    return _dft(input, n, dim, norm, inverse=True)


def rfft(input, n=None, dim=-1, norm=None):
    if input.dtype.is_complex:
        raise RuntimeError("rfft expects a real input tensor, but got " + str(input.dtype).replace("kiln.", ""))
    size = n if n is not None else input.shape[dim]
    return _dft(input, n, dim, norm, inverse=False, n_out=size // 2 + 1)


def irfft(input, n=None, dim=-1, norm=None):
    """The real signal of length n (default 2 * (m - 1)) whose rfft is input's m frequencies:
    the spectrum's Hermitian half counted twice, except the zero frequency and (n even) the
    Nyquist one, whose imaginary parts are ignored as torch's are."""
    dim = dim % max(input.dim(), 1)
    n = n if n is not None else 2 * (input.shape[dim] - 1)
    if n < 1:
        raise RuntimeError(f"Invalid number of data points ({n}) specified")
    half = n // 2 + 1
    x = _resized(input, half, dim)
    dtype = _real_dtype(x)
    c, s = _cos_sin(n, half, dtype, x.device)
    weight = _ops.full((half,), 2.0, dtype=dtype, device=x.device)
    weight[0] = 1.0
    if n % 2 == 0:
        weight[-1] = 1.0
    re, im = _parts(_ops.movedim(x, dim, -1), dtype)
    out = (re * weight) @ c.t()
    if im is not None:
        out = out - (im * weight) @ s.t()
    return _ops.movedim(out * _scale(n, norm, inverse=True), -1, dim)


def _dims(input, s, dim):
    if dim is None:
        dim = list(range(input.dim())) if s is None else list(range(input.dim() - len(s), input.dim()))
    dim = [d % input.dim() for d in ([dim] if isinstance(dim, int) else dim)]
    s = [None] * len(dim) if s is None else list(s)
    return s, dim


def fftn(input, s=None, dim=None, norm=None):
    s, dim = _dims(input, s, dim)
    for n, d in zip(s, dim):
        input = _dft(input, n, d, norm, inverse=False)
    return input


def ifftn(input, s=None, dim=None, norm=None):
    s, dim = _dims(input, s, dim)
    for n, d in zip(s, dim):
        input = _dft(input, n, d, norm, inverse=True)
    return input


def rfftn(input, s=None, dim=None, norm=None):
    s, dim = _dims(input, s, dim)
    out = rfft(input, s[-1], dim[-1], norm)
    for n, d in zip(s[:-1], dim[:-1]):
        out = _dft(out, n, d, norm, inverse=False)
    return out


def fft2(input, s=None, dim=(-2, -1), norm=None):
    return fftn(input, s, dim, norm)


def ifft2(input, s=None, dim=(-2, -1), norm=None):
    return ifftn(input, s, dim, norm)


def rfft2(input, s=None, dim=(-2, -1), norm=None):
    return rfftn(input, s, dim, norm)


def fftfreq(n, d=1.0, *, dtype=None, device=None):
    """[0, 1, ..., (n - 1) // 2, -(n // 2), ..., -1] / (d * n)."""
    k = _ops.arange(n, dtype=_C.int64, device=device)
    k = _ops.where(k < (n + 1) // 2, k, k - n)
    return k.to(dtype or _C._get_default_dtype()) / (d * n)


def rfftfreq(n, d=1.0, *, dtype=None, device=None):
    return _ops.arange(n // 2 + 1, dtype=dtype or _C._get_default_dtype(), device=device) / (d * n)


def fftshift(input, dim=None):
    dims = list(range(input.dim())) if dim is None else ([dim] if isinstance(dim, int) else list(dim))
    return _ops.roll(input, [input.shape[d] // 2 for d in dims], dims)


def ifftshift(input, dim=None):
    dims = list(range(input.dim())) if dim is None else ([dim] if isinstance(dim, int) else list(dim))
    return _ops.roll(input, [-(input.shape[d] // 2) for d in dims], dims)
