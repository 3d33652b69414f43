"""AdamW and OneCycleLR made inside the compiled function from `model.parameters()` (a
generator live at the constructor's break): torch.compile cannot rebuild the generator and runs
the frame eagerly, capturing only the optimizer's step (1 graph, 0 breaks); kiln does the same."""
from cutil import init_module, randn, rng

TAGS = ["tier2", "graph-break", "optim"]


def build(T):
    r = rng(38)
    model = init_module(T, T.nn.Sequential(T.nn.Linear(6, 8), T.nn.Tanh(), T.nn.Linear(8, 1)))

    def fn(x, y):
        opt = T.optim.AdamW(model.parameters(), lr=0.1)
        sched = T.optim.lr_scheduler.OneCycleLR(opt, max_lr=0.05, total_steps=10)
        loss = ((model(x) - y) ** 2).mean()
        loss.backward()
        opt.step()
        sched.step()
        opt.zero_grad()
        return loss.detach(), model[0].weight.detach().clone(), opt.param_groups[0]["lr"]

    return fn, [(randn(T, r, 5, 6), randn(T, r, 5, 1)), (randn(T, r, 5, 6), randn(T, r, 5, 1))]
