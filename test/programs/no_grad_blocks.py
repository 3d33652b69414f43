"""no_grad / enable_grad / set_grad_enabled blocks inside a training function: targets and
statistics computed without autograd, a detached branch, requires_grad checks."""
from cutil import init_module, randn, rng

TAGS = ["autograd", "nn", "tier2"]
RTOL, ATOL = 1e-4, 1e-5


def build(T):
    nn = T.nn
    net = init_module(T, nn.Sequential(nn.Linear(5, 8), nn.Tanh(), nn.Linear(8, 1)))

    def fn(x, r):
        with T.no_grad():
            target = r + 0.9 * net(x).squeeze(-1)          # a TD target, no gradient
            stats = x.mean(0), x.std(0)
            with T.enable_grad():
                inner = (x * 2).requires_grad
        with T.set_grad_enabled(False):
            frozen = net[0](x)
        pred = net((x - stats[0]) / stats[1]).squeeze(-1)
        loss = (pred - target).pow(2).mean() + (pred * frozen.sum(-1).detach()).mean()
        grads = T.autograd.grad(loss, list(net.parameters()))
        return loss.detach(), target.requires_grad, frozen.requires_grad, inner, grads

    rg = rng(43)
    return fn, [(randn(T, rg, 7, 5), randn(T, rg, 7))]
