"""vit-pytorch's RvT rotary embedding: helpers decorated with `@autocast("cuda", enabled=False)`
(an autocast object made at import, entered by the decorator's wrapper inside the compiled
frame) and a scale indexed with a tuple built from the builtin Ellipsis. One graph, as torch."""
from math import pi

from cutil import init_module, randn, rng

TAGS = ["tier2", "autocast"]
RTOL, ATOL = 1e-5, 1e-5
MAX_BREAKS = 0


def build(T):
    r = rng(61)

    @T.amp.autocast("cuda", enabled=False)
    def rotate_every_two(x):
        x = x.reshape(*x.shape[:-1], -1, 2)
        x1, x2 = x.unbind(dim=-1)
        return T.stack((-x2, x1), dim=-1).flatten(-2)

    scales = T.linspace(1.0, 5.0, 4)
    proj = init_module(T, T.nn.Linear(16, 16))

    @T.amp.autocast("cuda", enabled=False)
    def rotary(n):
        seq = T.linspace(-1.0, 1.0, steps=n).unsqueeze(-1)
        s = scales[(*((None,) * (len(seq.shape) - 1)), Ellipsis)]
        seq = seq * s * pi
        sin = T.cat((seq.sin(), seq.cos()), dim=-1).repeat_interleave(2, dim=-1)
        return sin[:, :16]

    def fn(x):
        q = proj(x)
        sin = rotary(x.shape[-2])
        out = q * sin.cos() + rotate_every_two(q) * sin
        return out, out.softmax(-1).sum()

    return fn, [(randn(T, r, 2, 5, 16),)]
