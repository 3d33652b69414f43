"""Activation checkpointing as large models use it: torch.utils.checkpoint.checkpoint
(use_reentrant=False) around residual MLP blocks, checkpoint_sequential over a Sequential, and
gradients equal to the plain model's."""
from cutil import init_module, randn, rng

TAGS = ["autograd", "nn", "checkpoint", "tier2"]
RTOL, ATOL = 1e-4, 1e-5


def build(T):
    nn = T.nn
    from importlib import import_module
    ckpt = import_module(T.__name__ + ".utils.checkpoint")

    class Block(nn.Module):
        def __init__(self):
            super().__init__()
            self.ff = nn.Sequential(nn.LayerNorm(8), nn.Linear(8, 16), nn.GELU(), nn.Linear(16, 8))

        def forward(self, x):
            return x + self.ff(x)

    blocks = init_module(T, nn.Sequential(Block(), Block(), Block(), Block()))

    def fn(x):
        h = x
        for b in blocks[:2]:
            h = ckpt.checkpoint(b, h, use_reentrant=False)
        h = ckpt.checkpoint_sequential(blocks[2:], 2, h, use_reentrant=False)
        loss = h.square().mean()
        gx, gw = T.autograd.grad(loss, [x, blocks[0].ff[1].weight])
        return h.detach(), gx, gw

    r = rng(126)
    return fn, [(randn(T, r, 4, 8, requires_grad=True),)]
