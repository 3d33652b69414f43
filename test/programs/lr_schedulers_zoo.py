"""LR schedulers as training loops chain them, stepped once per compiled step: LinearLR warmup
into MultiStepLR via SequentialLR, ChainedScheduler(ExponentialLR, PolynomialLR), CyclicLR
(triangular2, cycle_momentum on SGD momentum), LambdaLR with per-group lambdas, StepLR; the
learning rates (and the momentum CyclicLR drives) after each step, and get_last_lr()."""
from cutil import init_module, randn, rng

TAGS = ["training", "optim", "tier2"]
RTOL, ATOL = 1e-5, 1e-7


def build(T):
    S = T.optim.lr_scheduler
    lin = init_module(T, T.nn.Linear(3, 1), seed=14)
    o1 = T.optim.SGD(lin.parameters(), lr=0.1)
    s1 = S.SequentialLR(o1, [S.LinearLR(o1, start_factor=0.25, total_iters=2),
                             S.MultiStepLR(o1, milestones=[1, 3], gamma=0.5)], milestones=[2])
    o2 = T.optim.SGD(lin.parameters(), lr=0.2)
    s2 = S.ChainedScheduler([S.ExponentialLR(o2, gamma=0.9), S.PolynomialLR(o2, total_iters=4, power=2.0)])
    o3 = T.optim.SGD(lin.parameters(), lr=0.1, momentum=0.9)
    s3 = S.CyclicLR(o3, base_lr=0.01, max_lr=0.1, step_size_up=2, mode="triangular2", cycle_momentum=True,
                    base_momentum=0.8, max_momentum=0.9)
    o4 = T.optim.Adam([{"params": [lin.weight]}, {"params": [lin.bias], "lr": 0.5}], lr=0.05)
    s4 = S.LambdaLR(o4, [lambda e: 0.95 ** e, lambda e: 1.0 / (e + 1)])
    o5 = T.optim.SGD(lin.parameters(), lr=0.3)
    s5 = S.StepLR(o5, step_size=2, gamma=0.3)
    opts, scheds = [o1, o2, o3, o4, o5], [s1, s2, s3, s4, s5]

    def fn(x, y):
        loss = ((lin(x) - y) ** 2).mean()
        for o in opts:
            o.zero_grad()
        loss.backward()
        for o, s in zip(opts, scheds):
            o.step()
            s.step()
        lrs = [g["lr"] for o in opts for g in o.param_groups]
        return loss.detach(), lrs, o3.param_groups[0]["momentum"], s2.get_last_lr(), s4.get_last_lr()

    r = rng(170)
    return fn, [(randn(T, r, 4, 3), randn(T, r, 4, 1)) for _ in range(5)]
