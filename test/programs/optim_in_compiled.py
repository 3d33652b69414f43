"""An optimizer and an LR scheduler made inside the compiled function and stepped there: the
forward and loss compile, the optimizer's construction and steps are graph breaks (as with
torch.compile), the parameter values and learning rates equal eager's."""
from cutil import init_module, randn, rng

TAGS = ["tier2", "graph-break", "optim"]
RTOL, ATOL = 1e-4, 1e-5


def build(T):
    r = rng(31)
    model = init_module(T, T.nn.Sequential(T.nn.Linear(6, 8), T.nn.Tanh(), T.nn.Linear(8, 1)))

    def fn(x, y):
        opt = T.optim.SGD(list(model.parameters()), lr=0.1, momentum=0.9)
        sched = T.optim.lr_scheduler.LambdaLR(opt, lambda step: 1.0 / (1 + step))
        loss = ((model(x) - y) ** 2).mean()
        loss.backward()
        opt.step()
        sched.step()
        opt.zero_grad()
        return loss.detach(), model[0].weight.detach().clone(), opt.param_groups[0]["lr"]

    return fn, [(randn(T, r, 5, 6), randn(T, r, 5, 1)), (randn(T, r, 5, 6), randn(T, r, 5, 1))]
