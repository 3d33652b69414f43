"""A WaveNet-style stack of dilated causal Conv1d (left padding with F.pad), gated
activations, residual and skip sums; gradients of the input."""
from cutil import init_module, randn, rng

TAGS = ["nn", "conv", "autograd", "tier2"]
RTOL, ATOL = 1e-4, 1e-5


def build(T):
    nn, F = T.nn, T.nn.functional

    class CausalStack(nn.Module):
        def __init__(self, c):
            super().__init__()
            self.convs = nn.ModuleList(nn.Conv1d(c, 2 * c, 2, dilation=d) for d in (1, 2, 4))
            self.res = nn.ModuleList(nn.Conv1d(c, c, 1) for _ in range(3))

        def forward(self, x):
            skip = 0
            for i, (conv, res) in enumerate(zip(self.convs, self.res)):
                d = 2 ** i
                h = conv(F.pad(x, (d, 0)))
                a, b = h.chunk(2, dim=1)
                g = a.tanh() * b.sigmoid()
                x = x + res(g)
                skip = skip + g
            return x, skip

    model = init_module(T, CausalStack(4))

    def fn(x):
        y, skip = model(x)
        gx, = T.autograd.grad((y * skip).sum(), [x])
        return y.detach(), skip.detach(), gx

    r = rng(35)
    return fn, [(randn(T, r, 2, 4, 10, requires_grad=True),)]
