"""Higher-order gradients with autograd.grad(create_graph=True) inside compiled code, appended
to a list: d/dx, d2/dx2 of a pointwise function, then a pointwise use of both."""
from cutil import randn, rng

TAGS = ["tier2", "graph-break", "autograd"]


def build(T):
    r = rng(34)

    def fn(x):
        x = x.clone().requires_grad_(True)
        grads = []
        y = (x.sin() * x.exp()).sum()
        (d1,) = T.autograd.grad(y, x, create_graph=True)
        grads.append(d1.detach())
        grads.append(T.autograd.grad(d1.sum(), x)[0])
        return grads[0] * 2 + grads[1].cos()

    return fn, [(randn(T, r, 8),), (randn(T, r, 8),)]
