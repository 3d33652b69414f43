"""A ConvNeXt/ViT-style residual branch: layer scale (per-channel gamma) and stochastic depth
(drop path) with given per-sample keep draws; training gradients and eval mode."""
from cutil import init_module, randn, rng

TAGS = ["nn", "autograd", "tier2"]
RTOL, ATOL = 1e-4, 1e-5


def build(T):
    nn, F = T.nn, T.nn.functional

    class Block(nn.Module):
        def __init__(self, d, p):
            super().__init__()
            self.norm = nn.LayerNorm(d)
            self.mlp = nn.Sequential(nn.Linear(d, 2 * d), nn.GELU(), nn.Linear(2 * d, d))
            self.gamma = nn.Parameter(1e-1 * T.ones(d))
            self.p = p

        def drop_path(self, x, u):
            if not self.training or self.p == 0.0:
                return x
            keep = 1 - self.p
            mask = (u + keep).floor().view(-1, *([1] * (x.dim() - 1)))
            return x.div(keep) * mask

        def forward(self, x, u):
            return x + self.drop_path(self.gamma * self.mlp(self.norm(x)), u)

    block = init_module(T, Block(8, 0.25))

    def fn(x, u, train):
        block.train(train)
        y = block(x, u)
        g = T.autograd.grad(y.square().sum(), [block.gamma, x])
        return y.detach(), g

    r = rng(32)
    u = T.tensor([0.1, 0.9, 0.5, 0.7])
    return fn, [(randn(T, r, 4, 5, 8, requires_grad=True), u, True),
                (randn(T, r, 4, 5, 8, requires_grad=True), u, False)]
