"""A training loop whose step is compiled: AdamW, CosineAnnealingWarmRestarts stepped per batch
with a fractional epoch, ReduceLROnPlateau stepped on the loss, clip_grad_value_, and the learning
rates read back from param_groups."""
from cutil import init_module, randn, rng

TAGS = ["training", "optim", "tier2"]
RTOL, ATOL = 1e-4, 1e-5


def build(T):
    nn, F = T.nn, T.nn.functional
    model = init_module(T, nn.Sequential(nn.Linear(6, 16), nn.GELU(), nn.Linear(16, 2)))
    opt = T.optim.AdamW(model.parameters(), lr=0.05, weight_decay=0.01, betas=(0.8, 0.95))
    cosine = T.optim.lr_scheduler.CosineAnnealingWarmRestarts(opt, T_0=2, T_mult=2, eta_min=1e-3)
    plateau = T.optim.lr_scheduler.ReduceLROnPlateau(opt, mode="min", factor=0.5, patience=0,
                                                     threshold=0.5)
    state = {"it": 0}

    def step(x, y):
        opt.zero_grad(set_to_none=True)
        loss = F.smooth_l1_loss(model(x), y, beta=0.5)
        loss.backward()
        nn.utils.clip_grad_value_(model.parameters(), clip_value=0.3)
        opt.step()
        state["it"] += 1
        cosine.step(state["it"] / 3)
        plateau.step(loss.item())
        return loss.detach(), model[2].weight.detach().clone(), opt.param_groups[0]["lr"]

    r = rng(101)
    return step, [(randn(T, r, 8, 6), randn(T, r, 8, 2)) for _ in range(4)]
