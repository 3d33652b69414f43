"""Mixup: blend a batch with a permutation of itself and mix the two losses; a training step."""
from cutil import init_module, randint, randn, rng, tensor
import numpy as np

TAGS = ["training", "autograd", "nn", "tier2"]
RTOL, ATOL = 1e-3, 1e-4


def build(T):
    nn, F = T.nn, T.nn.functional
    model = init_module(T, nn.Sequential(nn.Linear(10, 16), nn.GELU(), nn.Linear(16, 4)))
    opt = T.optim.SGD(model.parameters(), lr=0.05, momentum=0.9, nesterov=True)
    r = rng(26)

    def step(x, y, perm, lam):
        opt.zero_grad()
        xm = lam * x + (1 - lam) * x[perm]
        out = model(xm)
        loss = lam * F.cross_entropy(out, y) + (1 - lam) * F.cross_entropy(out, y[perm])
        loss.backward()
        opt.step()
        return loss.detach(), model[0].weight.detach().clone()

    calls = []
    for lam in (0.7, 0.35):
        perm = tensor(T, r.permutation(8).astype(np.int64))
        calls.append((randn(T, r, 8, 10), randint(T, r, 0, 4, 8), perm, lam))
    return step, calls
