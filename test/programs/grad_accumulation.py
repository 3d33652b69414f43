"""Gradient accumulation over micro-batches (loss / steps, backward per chunk, one step),
with a warmup + cosine learning-rate schedule computed by hand and written to param_groups."""
import math

from cutil import init_module, randint, randn, rng

TAGS = ["training", "autograd", "nn", "tier2"]
RTOL, ATOL = 1e-3, 1e-4


def build(T):
    nn, F = T.nn, T.nn.functional
    model = init_module(T, nn.Sequential(nn.Linear(6, 12), nn.SiLU(), nn.Linear(12, 4)))
    opt = T.optim.AdamW(model.parameters(), lr=0.0, betas=(0.9, 0.95))

    def step(x, y, it):
        lr = 1e-2 * min(1.0, (it + 1) / 2) * 0.5 * (1 + math.cos(math.pi * it / 4))
        for g in opt.param_groups:
            g["lr"] = lr
        opt.zero_grad(set_to_none=True)
        total = 0.0
        for xc, yc in zip(x.chunk(3), y.chunk(3)):
            loss = F.cross_entropy(model(xc), yc) / 3
            loss.backward()
            total += loss.item()
        opt.step()
        return total, model[0].weight.detach().clone()

    r = rng(46)
    return step, [(randn(T, r, 12, 6), randint(T, r, 0, 4, 12), it) for it in range(3)]
