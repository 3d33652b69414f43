"""In-place ops through views of an intermediate and of an input: strided slices, a
transpose, the diagonal, unsqueeze/expand reads after the write, masked_fill_ and clamp_."""
from cutil import randn, rng

TAGS = ["mutation", "views"]


def build(T):
    def fn(x, buf):
        y = x.clone()
        y[:, ::2].mul_(2.0)
        y.t()[1].add_(10.0)
        y.diagonal().zero_()
        y[1:3, 1:3].masked_fill_(y[1:3, 1:3] > 1.0, -1.0)
        z = y.unsqueeze(0).expand(2, -1, -1)
        buf[1:].clamp_(min=-0.5, max=0.5)
        buf.view(2, -1)[0].sub_(x.mean())
        return y, z.sum(0), buf

    r = rng(42)
    return fn, [(randn(T, r, 4, 5), randn(T, r, 6))]
