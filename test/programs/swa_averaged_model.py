"""Stochastic weight averaging as the torch.optim.swa_utils recipe does it: an AveragedModel
(equal averaging) and an EMA AveragedModel (get_ema_multi_avg_fn, use_buffers=True) updated
after each SGD step, SWALR annealing the learning rate, and update_bn recomputing BatchNorm
statistics over a loader of batches at the end; the averaged predictions."""
from cutil import init_module, randn, rng

TAGS = ["training", "optim", "nn", "tier2"]
RTOL, ATOL = 1e-4, 1e-5


def build(T):
    swa = T.optim.swa_utils
    model = init_module(T, T.nn.Sequential(T.nn.Linear(4, 8), T.nn.BatchNorm1d(8), T.nn.ReLU(),
                                           T.nn.Linear(8, 1)), seed=22)
    avg = swa.AveragedModel(model)
    ema = swa.AveragedModel(model, multi_avg_fn=swa.get_ema_multi_avg_fn(0.9), use_buffers=True)
    opt = T.optim.SGD(model.parameters(), lr=0.1)
    sched = swa.SWALR(opt, swa_lr=0.05, anneal_epochs=2, anneal_strategy="linear")

    def fn(x, y, loader):
        model.train()
        loss = ((model(x) - y) ** 2).mean()
        opt.zero_grad()
        loss.backward()
        opt.step()
        avg.update_parameters(model)
        ema.update_parameters(model)
        sched.step()
        swa.update_bn(loader, avg)
        avg.eval()
        ema.eval()
        with T.no_grad():
            p_avg, p_ema = avg(x), ema(x)
        return loss.detach(), p_avg, p_ema, opt.param_groups[0]["lr"], avg.n_averaged.clone(), \
            avg.module[1].running_mean.clone(), ema.module[1].running_var.clone()

    r = rng(181)
    calls = []
    for _ in range(3):
        loader = [randn(T, r, 6, 4) for _ in range(2)]
        calls.append((randn(T, r, 6, 4), randn(T, r, 6, 1), loader))
    return fn, calls
