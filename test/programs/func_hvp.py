"""Hessian-vector products (forward-over-reverse: jvp of grad; reverse-over-reverse: vjp of grad)
and the full hessian of a scalar function, inside a compiled function."""
from cutil import randn, rng

TAGS = ["functorch", "autograd"]
RTOL, ATOL = 1e-4, 1e-5


def build(T):
    r = rng(63)
    A = randn(T, r, 5, 5)

    def f(x):
        return ((x @ A).sin() * x).sum() + (x ** 3).sum()

    def fn(x, v):
        _, hvp1 = T.func.jvp(T.func.grad(f), (x,), (v,))
        _, vjp_fn = T.func.vjp(T.func.grad(f), x)
        (hvp2,) = vjp_fn(v)
        h = T.func.hessian(f)(x)
        return hvp1, hvp2, h @ v

    return fn, [(randn(T, r, 5), randn(T, r, 5)), (randn(T, r, 5), randn(T, r, 5))]
