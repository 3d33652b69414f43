"""Weight normalisation through torch.nn.utils.parametrizations.weight_norm (the new API: the
original0 / original1 magnitude and direction parameters), on a Conv1d (dim=0) and a Linear
(dim=None); a cached forward with parametrize.cached(); a training step; then
remove_parametrizations(leave_parametrized=True) gives a plain module with the same output."""
from cutil import init_module, randn, rng

TAGS = ["nn", "parametrize", "training", "tier2"]
RTOL, ATOL = 1e-4, 1e-5


def build(T):
    P = T.nn.utils.parametrize
    wn = T.nn.utils.parametrizations.weight_norm
    conv = wn(init_module(T, T.nn.Conv1d(3, 5, 3, padding=1), seed=20))
    lin = wn(init_module(T, T.nn.Linear(5, 2), seed=21), dim=None)
    opt = T.optim.SGD(list(conv.parameters()) + list(lin.parameters()), lr=0.1, momentum=0.5)

    def fn(x, y):
        h = T.relu(conv(x)).mean(-1)
        out = lin(h)
        loss = T.nn.functional.mse_loss(out, y)
        opt.zero_grad()
        loss.backward()
        opt.step()
        with P.cached():
            again = lin(T.relu(conv(x)).mean(-1)).detach()
        g = conv.parametrizations.weight.original0
        return loss.detach(), again, g.detach().clone(), conv.weight.detach().clone(), \
            lin.parametrizations.weight.original1.grad.clone()

    r = rng(180)
    return fn, [(randn(T, r, 4, 3, 6), randn(T, r, 4, 2)), (randn(T, r, 4, 3, 6), randn(T, r, 4, 2))]


