"""FFT-based long convolution (as in Hyena/S4-style models): rfft of signal and kernel with
zero padding, complex multiply, irfft, truncation; fft / ifft round trip, fftshift, magnitude
and phase of a spectrum, a 2-D rfft2; gradients to the kernel."""
from cutil import randn, rng

TAGS = ["fft", "complex", "autograd", "tier2"]
RTOL, ATOL = 1e-4, 1e-4


def build(T):
    fft = T.fft

    def fn(u, k, img):
        L = u.shape[-1]
        n = 2 * L
        uf = fft.rfft(u, n=n)
        kf = fft.rfft(k, n=n)
        y = fft.irfft(uf * kf, n=n)[..., :L]
        direct = T.nn.functional.conv1d(T.nn.functional.pad(u[:, None], (L - 1, 0)),
                                        k.flip(-1)[None, None])[:, 0]
        spec = fft.fft(u)
        back = fft.ifft(spec).real
        mag, phase = spec.abs(), spec.angle()
        shifted = fft.fftshift(mag, dim=-1)
        f2 = fft.rfft2(img, norm="ortho")
        power = (f2.real ** 2 + f2.imag ** 2).sum()
        gk, = T.autograd.grad(y.square().sum(), [k])
        return y, direct, back, mag, phase, shifted, power, gk

    r = rng(119)
    return fn, [(randn(T, r, 3, 16), randn(T, r, 16, requires_grad=True), randn(T, r, 2, 6, 8))]
