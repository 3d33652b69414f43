"""Gradient clipping by global norm (nn.utils.clip_grad_norm_) and by value inside a step."""
from cutil import init_module, randint, randn, rng

TAGS = ["training", "autograd", "nn", "tier2"]
RTOL, ATOL = 1e-3, 1e-4


def build(T):
    nn, F = T.nn, T.nn.functional
    model = init_module(T, nn.Sequential(nn.Linear(8, 32), nn.Tanh(), nn.Linear(32, 3)), scale=1.0)
    opt = T.optim.SGD(model.parameters(), lr=0.1)

    def step(x, y):
        opt.zero_grad()
        loss = F.cross_entropy(model(x) * 5, y)
        loss.backward()
        total = nn.utils.clip_grad_norm_(model.parameters(), max_norm=0.5)
        nn.utils.clip_grad_value_(model[2].parameters(), 0.05)
        opt.step()
        return loss.detach(), total, model[2].weight.detach().clone()

    r = rng(27)
    return step, [(randn(T, r, 16, 8), randint(T, r, 0, 3, 16)) for _ in range(3)]
