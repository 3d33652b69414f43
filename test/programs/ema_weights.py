"""An exponential moving average of a model's weights and buffers, updated under no_grad after
each step (lerp_ and mul_/add_ forms), as a teacher model in self-distillation. (No bias before
the BatchNorm: its gradient would be rounding noise, which Adam's normalisation magnifies.)"""
import copy

from cutil import init_module, randn, rng

TAGS = ["training", "mutation", "nn", "tier2"]
RTOL, ATOL = 1e-4, 1e-5


def build(T):
    nn = T.nn
    model = init_module(T, nn.Sequential(nn.Linear(6, 12, bias=False), nn.BatchNorm1d(12), nn.ReLU(), nn.Linear(12, 2)))
    ema = copy.deepcopy(model)
    for p in ema.parameters():
        p.requires_grad_(False)
    opt = T.optim.AdamW(model.parameters(), lr=1e-2, weight_decay=0.1)

    def step(x, decay):
        opt.zero_grad()
        loss = (model(x) - ema(x)).pow(2).mean() + model(x).abs().mean()
        loss.backward()
        opt.step()
        with T.no_grad():
            for pe, p in zip(ema.parameters(), model.parameters()):
                pe.mul_(decay).add_(p.detach(), alpha=1 - decay)
            for be, b in zip(ema.buffers(), model.buffers()):
                if be.dtype.is_floating_point:
                    be.lerp_(b, 1 - decay)
                else:
                    be.copy_(b)
        return loss.detach(), [t.clone() for t in ema.state_dict().values()]

    r = rng(28)
    return step, [(randn(T, r, 10, 6), 0.9), (randn(T, r, 10, 6), 0.9), (randn(T, r, 10, 6), 0.99)]
