"""torch.nn.utils.parametrize with user parametrizations: a symmetric weight and a positive
(softplus) bias registered on Linear layers, parametrize.cached(), the .parametrizations
original tensors receiving gradients, remove_parametrizations(leave_parametrized=True)."""
from cutil import init_module, randn, rng

TAGS = ["nn", "parametrize", "autograd", "tier2"]
RTOL, ATOL = 1e-4, 1e-5


def build(T):
    nn, F = T.nn, T.nn.functional
    P = nn.utils.parametrize

    class Symmetric(nn.Module):
        def forward(self, X):
            return X.triu() + X.triu(1).transpose(-1, -2)

    class Positive(nn.Module):
        def forward(self, b):
            return F.softplus(b)

    lin = init_module(T, nn.Linear(6, 6))
    out = init_module(T, nn.Linear(6, 2))
    P.register_parametrization(lin, "weight", Symmetric())
    P.register_parametrization(lin, "bias", Positive())

    def fn(x):
        with P.cached():
            h = T.tanh(lin(x))
            h = T.tanh(lin(h))
        y = out(h)
        loss = y.square().mean()
        g_orig, = T.autograd.grad(loss, [lin.parametrizations.weight.original])
        sym = (lin.weight - lin.weight.T).abs().max()
        return y, g_orig, sym, lin.bias.min() > 0, P.is_parametrized(lin, "weight")

    r = rng(114)
    return fn, [(randn(T, r, 5, 6),), (randn(T, r, 5, 6),)]
