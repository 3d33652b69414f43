"""Quantization-aware training with a learned step size (LSQ, Esser et al.): a custom
autograd.Function quantizes weights and activations in the forward of two linear layers, with
the straight-through gradient for the input inside the clipping range and LSQ's gradient for the
scale; the bit widths are non-tensor arguments kept on ctx, the grad scale a float. A loss and
the gradients of the input, the weights and the scales."""
from cutil import init_module, randn, rng

TAGS = ["autograd", "custom-function", "quantization", "tier2"]
RTOL, ATOL = 1e-4, 1e-5


def build(T):
    nn = T.nn

    class LSQ(T.autograd.Function):
        @staticmethod
        def forward(ctx, x, scale, bits, signed, grad_scale):
            qmin, qmax = (-(2 ** (bits - 1)), 2 ** (bits - 1) - 1) if signed else (0, 2 ** bits - 1)
            ctx.save_for_backward(x, scale)
            ctx.qmin, ctx.qmax, ctx.grad_scale = qmin, qmax, grad_scale
            q = T.clamp(T.round(x / scale), qmin, qmax)
            return q * scale

        @staticmethod
        def backward(ctx, g):
            x, scale = ctx.saved_tensors
            v = x / scale
            lower, upper = v < ctx.qmin, v > ctx.qmax
            inside = ~(lower | upper)
            gx = g * inside.to(g.dtype)
            gs = T.where(lower, T.full_like(v, ctx.qmin), T.where(upper, T.full_like(v, ctx.qmax), T.round(v) - v))
            gscale = (g * gs).sum().reshape(scale.shape) * ctx.grad_scale
            return gx, gscale, None, None, None

    class QLinear(nn.Module):
        def __init__(self, n_in, n_out, bits):
            super().__init__()
            self.lin = nn.Linear(n_in, n_out)
            self.bits = bits
            self.w_scale = nn.Parameter(T.full((1,), 0.05))
            self.a_scale = nn.Parameter(T.full((1,), 0.1))

        def forward(self, x):
            g = 1.0 / (x.numel() * (2 ** (self.bits - 1) - 1)) ** 0.5
            xq = LSQ.apply(x, self.a_scale, self.bits, True, g)
            wq = LSQ.apply(self.lin.weight, self.w_scale, self.bits, True, g)
            return nn.functional.linear(xq, wq, self.lin.bias)

    net = nn.Sequential(QLinear(8, 16, 4), nn.ReLU(), QLinear(16, 4, 8))
    init_module(T, net)
    params = list(net.parameters())

    def fn(x, target):
        loss = nn.functional.mse_loss(net(x), target)
        grads = T.autograd.grad(loss, [x] + params)
        return (loss,) + tuple(grads)

    r = rng(172)
    return fn, [(randn(T, r, 6, 8, requires_grad=True), randn(T, r, 6, 4)),
                (randn(T, r, 6, 8, requires_grad=True), randn(T, r, 6, 4))]
