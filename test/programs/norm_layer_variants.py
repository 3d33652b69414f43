"""Normalization layers real models use: LayerNorm without affine and without bias, RMSNorm,
GroupNorm on 3-D input, InstanceNorm1d/2d (affine and tracked), LocalResponseNorm, F.normalize,
and their gradients."""
from cutil import init_module, randn, rng

TAGS = ["nn", "autograd", "tier2"]
RTOL, ATOL = 1e-4, 1e-4


def build(T):
    nn, F = T.nn, T.nn.functional
    mods = init_module(T, nn.ModuleDict({
        "ln_noaff": nn.LayerNorm(8, elementwise_affine=False),
        "ln_nobias": nn.LayerNorm([4, 8], bias=False),
        "rms": nn.RMSNorm(8, eps=1e-6),
        "gn": nn.GroupNorm(2, 4, eps=1e-3),
        "in1": nn.InstanceNorm1d(4, affine=True),
        "in2": nn.InstanceNorm2d(4),
        "lrn": nn.LocalResponseNorm(3),
    }), scale=1.0)

    def fn(x, img):
        a = mods["ln_noaff"](x)
        b = mods["ln_nobias"](x)
        c = mods["rms"](x)
        d = mods["gn"](x)
        e = mods["in1"](x)
        f = mods["in2"](img)
        g = mods["lrn"](img)
        h = F.normalize(x, p=2.0, dim=-1) + F.layer_norm(x, (8,))
        total = sum(t.sin().sum() for t in (a, b, c, d, e, f, g, h))
        gx, gimg, gw = T.autograd.grad(total, [x, img, mods["rms"].weight])
        return a, b, c, d, e, f, g, h, gx, gimg, gw

    r = rng(109)
    return fn, [(randn(T, r, 3, 4, 8, requires_grad=True),
                 randn(T, r, 2, 4, 5, 5, requires_grad=True))]
