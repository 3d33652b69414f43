"""Custom autograd.Functions inside compiled code: a straight-through quantizer
(round in forward, identity gradient), a swish with ctx.save_for_backward and a hand-written
backward, a Function returning two outputs with mark_non_differentiable, needs_input_grad."""
from cutil import init_module, randn, rng

TAGS = ["autograd", "custom-function", "tier2"]
RTOL, ATOL = 1e-5, 1e-6


def build(T):
    nn = T.nn

    class RoundSTE(T.autograd.Function):
        @staticmethod
        def forward(ctx, x, scale):
            return T.round(x * scale) / scale

        @staticmethod
        def backward(ctx, g):
            return g, None

    class Swish(T.autograd.Function):
        @staticmethod
        def forward(ctx, x, beta):
            s = T.sigmoid(beta * x)
            ctx.save_for_backward(x, s)
            ctx.beta = beta
            return x * s

        @staticmethod
        def backward(ctx, g):
            x, s = ctx.saved_tensors
            gx = g * (s + ctx.beta * x * s * (1 - s)) if ctx.needs_input_grad[0] else None
            return gx, None

    class SortWithIdx(T.autograd.Function):
        @staticmethod
        def forward(ctx, x):
            v, i = x.sort(dim=-1)
            ctx.mark_non_differentiable(i)
            ctx.save_for_backward(i)
            return v, i

        @staticmethod
        def backward(ctx, gv, gi):
            i, = ctx.saved_tensors
            return T.zeros_like(gv).scatter(-1, i, gv)

    lin = init_module(T, nn.Linear(6, 6))

    def fn(x):
        q = RoundSTE.apply(lin(x), 4.0)
        h = Swish.apply(q, 1.5)
        v, i = SortWithIdx.apply(h)
        loss = (v * T.arange(6.0)).sum()
        gx, gw = T.autograd.grad(loss, [x, lin.weight])
        return q, h, v, i, gx, gw

    r = rng(117)
    return fn, [(randn(T, r, 3, 6, requires_grad=True),)]
