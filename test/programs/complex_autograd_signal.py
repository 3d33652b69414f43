"""Complex-valued model code with autograd: a complex linear layer written with complex weights
(view_as_complex of a real parameter), polar / abs / angle, conj and a phase rotation by
exp(1j * theta), real and imag parts in a real loss; gradients of complex leaves (conjugate
Wirtinger, as torch) and of real parameters through view_as_complex; an FFT magnitude loss."""
from cutil import randn, rng

TAGS = ["complex", "autograd", "fft", "tier2"]
RTOL, ATOL = 1e-4, 1e-5


def build(T):
    def fn(xr, wr, theta, zc):
        x = T.view_as_complex(xr)                 # (4, 3) complex from (4, 3, 2)
        w = T.view_as_complex(wr)                 # (3, 2) complex
        h = x @ w
        rot = h * T.exp(1j * theta)
        mag, ph = rot.abs(), rot.angle()
        p = T.polar(mag, ph + 0.1)
        y = p.conj() * zc
        spec = T.fft.fft(xr[..., 0], dim=-1)
        loss = y.real.sum() + (y.imag ** 2).mean() + mag.mean() + spec.abs().sum() + (zc * zc.conj()).real.sum()
        g_xr, g_wr, g_t, g_z = T.autograd.grad(loss, [xr, wr, theta, zc])
        return T.view_as_real(y.detach()), mag.detach(), ph.detach(), g_xr, g_wr, g_t, T.view_as_real(g_z)

    r = rng(175)
    z = T.complex(randn(T, r, 4, 2), randn(T, r, 4, 2)).requires_grad_()
    return fn, [(randn(T, r, 4, 3, 2, requires_grad=True), randn(T, r, 3, 2, 2, requires_grad=True),
                 randn(T, r, 2, requires_grad=True), z)]
