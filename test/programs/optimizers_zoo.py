"""Optimizers as training scripts configure them, each stepping its own copy of a small model
three times with a compiled loss step: RMSprop (centered, momentum, weight_decay), Adagrad
(lr_decay, initial_accumulator_value), Adadelta, NAdam (momentum_decay, decoupled_weight_decay),
RAdam, Adamax, SGD with nesterov and dampening-free momentum, AdamW with amsgrad."""
from cutil import init_module, randn, rng

TAGS = ["training", "optim", "tier2"]
RTOL, ATOL = 1e-4, 1e-5


def build(T):
    O = T.optim
    configs = [
        lambda p: O.RMSprop(p, lr=0.01, alpha=0.9, momentum=0.5, centered=True, weight_decay=0.01),
        lambda p: O.Adagrad(p, lr=0.1, lr_decay=0.01, initial_accumulator_value=0.1, weight_decay=0.01),
        lambda p: O.Adadelta(p, lr=1.0, rho=0.8, weight_decay=0.001),
        lambda p: O.NAdam(p, lr=0.01, momentum_decay=0.005, decoupled_weight_decay=True, weight_decay=0.01),
        lambda p: O.RAdam(p, lr=0.01, betas=(0.8, 0.9), weight_decay=0.01),
        lambda p: O.Adamax(p, lr=0.02, weight_decay=0.01),
        lambda p: O.SGD(p, lr=0.05, momentum=0.9, nesterov=True, weight_decay=1e-3),
        lambda p: O.AdamW(p, lr=0.01, amsgrad=True),
    ]
    models = [init_module(T, T.nn.Sequential(T.nn.Linear(4, 6), T.nn.Tanh(), T.nn.Linear(6, 2)), seed=13)
              for _ in configs]
    opts = [make(m.parameters()) for make, m in zip(configs, models)]

    def fn(x, y):
        losses, weights = [], []
        for m, opt in zip(models, opts):
            loss = T.nn.functional.mse_loss(m(x), y)
            opt.zero_grad()
            loss.backward()
            opt.step()
            losses.append(loss.detach())
            weights.append(m[2].weight.detach().clone())
        return losses, weights

    r = rng(168)
    return fn, [(randn(T, r, 8, 4), randn(T, r, 8, 2)) for _ in range(3)]
