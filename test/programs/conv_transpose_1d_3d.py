"""Transposed convolutions beyond 2-d: a 1-d decoder (ConvTranspose1d with stride, output_padding,
groups, dilation) as in audio upsamplers, and a 3-d one (ConvTranspose3d) as in volumetric
decoders, with output_size= given to the call; F.conv_transpose1d directly; gradients."""
from cutil import init_module, randn, rng

TAGS = ["nn", "conv", "autograd", "tier2"]
RTOL, ATOL = 1e-4, 1e-5


def build(T):
    F = T.nn.functional
    up1 = init_module(T, T.nn.ConvTranspose1d(4, 6, kernel_size=4, stride=2, padding=1, output_padding=1,
                                              groups=2, dilation=1), seed=6)
    up1d = init_module(T, T.nn.ConvTranspose1d(6, 2, kernel_size=3, stride=1, dilation=2, bias=False), seed=7)
    up3 = init_module(T, T.nn.ConvTranspose3d(3, 2, kernel_size=(2, 3, 3), stride=(1, 2, 2), padding=(0, 1, 1)),
                      seed=8)

    def fn(a, v, w):
        h = T.tanh(up1(a))
        h = up1d(h)
        vol = up3(v, output_size=[v.shape[2] + 1, 2 * v.shape[3], 2 * v.shape[4]])
        direct = F.conv_transpose1d(a, w, stride=3, padding=2)
        loss = h.square().mean() + vol.mean() + direct.sum()
        ga, gv, gw, g1 = T.autograd.grad(loss, [a, v, w, up1.weight])
        return h.detach(), vol.detach(), direct.detach(), ga, gv, gw, g1

    r = rng(164)
    return fn, [(randn(T, r, 2, 4, 7, requires_grad=True), randn(T, r, 1, 3, 3, 4, 5, requires_grad=True),
                 randn(T, r, 4, 2, 5, requires_grad=True))]
