"""`out.append(T.autograd.grad(y, x, ...)[0])` inside compiled code: an input gradient, a
gradient penalty (create_graph=True, differentiated again) and a second-order gradient. The
graphs before and after each autograd.grad compile; results equal eager."""
from cutil import init_module, randn, rng

TAGS = ["tier2", "graph-break", "autograd"]
RTOL, ATOL = 1e-4, 1e-5


def build(T):
    r = rng(33)
    net = init_module(T, T.nn.Sequential(T.nn.Linear(5, 7), T.nn.Tanh(), T.nn.Linear(7, 1)))

    def fn(x):
        out = []
        x = x.detach().requires_grad_(True)
        y = net(x).sum()
        out.append(T.autograd.grad(y, x)[0])
        z = (net(x * 2) ** 2).sum()
        g = T.autograd.grad(z, x, create_graph=True)[0]
        penalty = ((g.norm(2, dim=1) - 1) ** 2).mean()
        out.append(penalty.detach())
        out.append(T.autograd.grad(penalty, x)[0])
        out.append((g * 3).sin().detach())
        return out

    return fn, [(randn(T, r, 4, 5),), (randn(T, r, 4, 5),)]
