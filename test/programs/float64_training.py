"""Training in float64 as scientific / physics-informed code does: model.double(), float64 inputs
and targets, a loss with a derivative term from autograd.grad(create_graph=True) (a PINN
residual), Adam steps; the parameters stay float64 and equal eager's to tight tolerances."""
from cutil import init_module, randn, rng
import numpy as np

TAGS = ["training", "autograd", "dtype", "tier2"]
RTOL, ATOL = 1e-9, 1e-10


def build(T):
    net = init_module(T, T.nn.Sequential(T.nn.Linear(1, 8), T.nn.Tanh(), T.nn.Linear(8, 8), T.nn.Tanh(),
                                         T.nn.Linear(8, 1)), seed=16).double()
    opt = T.optim.Adam(net.parameters(), lr=1e-2)

    def fn(t, target):
        t = t.requires_grad_(True)
        u = net(t)
        du, = T.autograd.grad(u.sum(), t, create_graph=True)
        residual = du + u                      # u' = -u
        loss = (residual ** 2).mean() + ((net(T.zeros(1, 1, dtype=T.float64)) - 1.0) ** 2).sum() \
            + T.nn.functional.mse_loss(u, target)
        opt.zero_grad()
        loss.backward()
        opt.step()
        return loss.detach(), u.dtype == T.float64, net[0].weight.detach().clone(), du.detach()

    r = rng(178)
    return fn, [(randn(T, r, 16, 1, dtype=np.float64), randn(T, r, 16, 1, dtype=np.float64)) for _ in range(3)]
