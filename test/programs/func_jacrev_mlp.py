"""jacrev and jacfwd of a small MLP's output with respect to its input, inside a compiled function."""
from cutil import randn, rng

TAGS = ["functorch", "autograd"]
RTOL, ATOL = 1e-4, 1e-5


def build(T):
    r = rng(62)
    w1, b1, w2 = randn(T, r, 4, 6), randn(T, r, 6), randn(T, r, 6, 3)

    def mlp(x):
        return (x @ w1 + b1).tanh() @ w2

    def fn(x):
        jr = T.func.jacrev(mlp)(x)
        jf = T.func.jacfwd(mlp)(x)
        return jr, jf, jr - jf

    return fn, [(randn(T, r, 4),), (randn(T, r, 4),)]
