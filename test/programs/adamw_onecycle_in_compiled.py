"""AdamW and OneCycleLR made inside the compiled function, two steps taken there."""
from cutil import init_module, randn, rng

TAGS = ["tier2", "graph-break", "optim"]
RTOL, ATOL = 1e-4, 1e-5


def build(T):
    r = rng(32)
    model = init_module(T, T.nn.Linear(4, 3))

    def fn(x, y):
        opt = T.optim.AdamW(model.parameters(), lr=0.01, weight_decay=0.1)
        sched = T.optim.lr_scheduler.OneCycleLR(opt, max_lr=0.05, total_steps=10)
        losses = []
        for _ in range(2):
            loss = T.nn.functional.mse_loss(model(x), y)
            opt.zero_grad()
            loss.backward()
            opt.step()
            sched.step()
            losses.append(loss.detach())
        return T.stack(losses), model.weight.detach().clone(), sched.get_last_lr()[0]

    return fn, [(randn(T, r, 6, 4), randn(T, r, 6, 3))]
