"""Mixed-precision training on CPU as AMP code writes it: the forward under
autocast("cpu", bfloat16), the loss computed in float32, a dynamic loss scale applied before
backward and removed from the gradients, an inf/nan check that skips the step."""
from cutil import init_module, randint, randn, rng

TAGS = ["training", "autocast", "tier2"]
RTOL, ATOL = 3e-2, 3e-2


def build(T):
    nn, F = T.nn, T.nn.functional
    model = init_module(T, nn.Sequential(nn.Linear(8, 32), nn.SiLU(), nn.Linear(32, 4)))
    opt = T.optim.SGD(model.parameters(), lr=0.05)
    scale = {"s": 1024.0}

    def step(x, y):
        opt.zero_grad()
        with T.autocast("cpu", dtype=T.bfloat16):
            logits = model(x)
        loss = F.cross_entropy(logits.float(), y)
        (loss * scale["s"]).backward()
        grads = [p.grad for p in model.parameters()]
        finite = T.stack([T.isfinite(g).all() for g in grads]).all()
        for g in grads:
            g.div_(scale["s"])
        if finite:
            opt.step()
            scale["s"] *= 2.0
        else:
            scale["s"] /= 2.0
        return loss.detach(), logits.dtype == T.bfloat16, model[0].weight.detach().clone()

    r = rng(102)
    return step, [(randn(T, r, 16, 8), randint(T, r, 0, 4, 16)) for _ in range(3)]
