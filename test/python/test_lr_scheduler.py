"""kiln.optim.lr_scheduler against torch's: the lr (and cycled momentum) of every group, step
by step over 30 steps, equal as floats; state_dict round trips; errors."""
import inspect
import warnings

import pytest

import kiln
from oracle import need_torch

torch = need_torch()


def _optimizer(lib, name="SGD"):
    a, b = lib.zeros(2), lib.zeros(3)
    groups = [{"params": [a]}, {"params": [b], "lr": 0.5}]
    if name == "SGD":
        return lib.optim.SGD(groups, lr=0.1, momentum=0.9)
    return lib.optim.Adam(groups, lr=0.1)


def _half(epoch):
    return 0.5 ** epoch


def _linear(epoch):
    return 1.0 / (epoch + 1)


SCHEDULERS = [
    ("StepLR", dict(step_size=4, gamma=0.5), "SGD"),
    ("CosineAnnealingLR", dict(T_max=10), "SGD"),
    ("CosineAnnealingLR", dict(T_max=7, eta_min=0.01), "SGD"),
    ("MultiStepLR", dict(milestones=[3, 8, 8, 20], gamma=0.3), "SGD"),
    ("ExponentialLR", dict(gamma=0.9), "SGD"),
    ("LambdaLR", dict(lr_lambda=_half), "SGD"),
    ("LambdaLR", dict(lr_lambda=[_half, _linear]), "SGD"),
    ("LinearLR", dict(start_factor=0.25, total_iters=12), "SGD"),
    ("OneCycleLR", dict(max_lr=1.0, total_steps=31), "SGD"),
    ("OneCycleLR", dict(max_lr=[1.0, 2.0], total_steps=40, anneal_strategy="linear",
                        three_phase=True), "Adam"),
    ("ConstantLR", dict(factor=0.5, total_iters=4), "SGD"),
    ("MultiplicativeLR", dict(lr_lambda=lambda epoch: 0.95), "SGD"),
    ("PolynomialLR", dict(total_iters=12, power=2.0), "SGD"),
    ("CosineAnnealingWarmRestarts", dict(T_0=5, eta_min=0.01), "SGD"),
    ("CosineAnnealingWarmRestarts", dict(T_0=3, T_mult=2), "Adam"),
]


def _sequence(lib, name, kwargs, opt_name, steps=30):
    opt = _optimizer(lib, opt_name)
    sched = getattr(lib.optim.lr_scheduler, name)(opt, **kwargs)
    out = [sched.get_last_lr()]
    for _ in range(steps):
        opt.step()
        sched.step()
        lrs = sched.get_last_lr()
        momenta = [g.get("momentum", g.get("betas")) for g in opt.param_groups]
        out.append((lrs, momenta))
    return out


@pytest.mark.parametrize("name,kwargs,opt_name", SCHEDULERS,
                         ids=[f"{n}-{i}" for i, (n, _, _) in enumerate(SCHEDULERS)])
def test_lr_sequence_matches_torch(name, kwargs, opt_name):
    assert _sequence(kiln, name, kwargs, opt_name) == _sequence(torch, name, kwargs, opt_name)


@pytest.mark.parametrize("name", ["LRScheduler", "StepLR", "CosineAnnealingLR", "MultiStepLR",
                                  "ExponentialLR", "LambdaLR", "LinearLR", "OneCycleLR", "ReduceLROnPlateau",
                                  "ConstantLR", "MultiplicativeLR", "PolynomialLR", "CosineAnnealingWarmRestarts",
                                  "SequentialLR", "ChainedScheduler"])
def test_signatures_match_torch(name):
    def describe(cls):
        return [(p.name, p.default, p.kind) for p in inspect.signature(cls).parameters.values()]

    assert describe(getattr(kiln.optim.lr_scheduler, name)) == \
        describe(getattr(torch.optim.lr_scheduler, name))


def test_state_dict_round_trip_and_resume():
    opt = _optimizer(kiln)
    sched = kiln.optim.lr_scheduler.CosineAnnealingLR(opt, T_max=10)
    for _ in range(4):
        opt.step()
        sched.step()
    sd = sched.state_dict()
    assert "optimizer" not in sd and sd["last_epoch"] == 4 and sd["T_max"] == 10
    opt2 = _optimizer(kiln)
    opt2.load_state_dict(opt.state_dict())
    sched2 = kiln.optim.lr_scheduler.CosineAnnealingLR(opt2, T_max=10)
    sched2.load_state_dict(sd)
    for _ in range(5):
        for o, s in ((opt, sched), (opt2, sched2)):
            o.step()
            s.step()
        assert sched.get_last_lr() == sched2.get_last_lr()


def test_closed_form_with_epoch_matches_torch():
    def run(lib):
        opt = _optimizer(lib)
        sched = lib.optim.lr_scheduler.StepLR(opt, step_size=3, gamma=0.5)
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            sched.step(7)
        return sched.get_last_lr()

    assert run(kiln) == run(torch)


def test_warns_when_stepped_before_optimizer():
    opt = _optimizer(kiln)
    sched = kiln.optim.lr_scheduler.StepLR(opt, step_size=2)
    with pytest.warns(UserWarning, match="before `optimizer.step\\(\\)`"):
        sched.step()


def test_errors_as_torch():
    def errors(lib):
        opt = _optimizer(lib)
        out = []
        for fn in (lambda: lib.optim.lr_scheduler.StepLR(object(), 2),
                   lambda: lib.optim.lr_scheduler.LambdaLR(opt, [_half]),
                   lambda: lib.optim.lr_scheduler.LinearLR(opt, start_factor=0),
                   lambda: lib.optim.lr_scheduler.OneCycleLR(opt, max_lr=1.0),
                   lambda: lib.optim.lr_scheduler.CosineAnnealingLR(opt, 5, last_epoch=3)):
            try:
                fn()
                out.append(None)
            except Exception as e:  # noqa: BLE001 - compared with torch's
                out.append((type(e), str(e)))
        return out

    assert errors(kiln) == errors(torch)


def test_tensor_lr_is_filled_in_place():
    def run(lib):
        lr = lib.tensor(0.1)
        opt = lib.optim.SGD([lib.zeros(2)], lr=lr)
        sched = lib.optim.lr_scheduler.CosineAnnealingLR(opt, T_max=5)
        out = []
        for _ in range(7):
            opt.step()
            sched.step()
            assert opt.param_groups[0]["lr"] is lr
            out.append(sched.get_last_lr()[0].item())
        return out

    assert run(kiln) == run(torch)


@pytest.mark.parametrize("kwargs", [dict(patience=2), dict(mode="max", factor=0.5, patience=1, cooldown=2,
                                                              threshold_mode="abs", threshold=0.1, min_lr=[0.01, 0.2])])
def test_reduce_lr_on_plateau_matches_torch(kwargs):
    metrics = [1.0, 0.9, 0.95, 0.92, 0.91, 0.93, 0.5, 0.6, 0.7, 0.8, 0.4, 0.45, 0.47, 0.46, 0.44, 0.5]
    seqs = {}
    for lib in (kiln, torch):
        opt = _optimizer(lib)
        sched = lib.optim.lr_scheduler.ReduceLROnPlateau(opt, **kwargs)
        seqs[lib] = []
        for m in metrics:
            opt.step()
            sched.step(lib.tensor(m) if m > 0.9 else m)
            seqs[lib].append((sched.get_last_lr(), sched.num_bad_epochs, sched.cooldown_counter))
        seqs[lib].append(sorted(k for k in sched.state_dict()))
    assert seqs[kiln] == seqs[torch]
    for lib in (kiln, torch):
        with pytest.raises(ValueError, match="Factor should be < 1.0."):
            lib.optim.lr_scheduler.ReduceLROnPlateau(_optimizer(lib), factor=1.0)
        with pytest.raises(ValueError, match="expected 2 min_lrs, got 1"):
            lib.optim.lr_scheduler.ReduceLROnPlateau(_optimizer(lib), min_lr=[0.1])


def _composed(lib, kind):
    S = lib.optim.lr_scheduler
    opt = _optimizer(lib)
    if kind == "sequential":
        warmup = S.LinearLR(opt, start_factor=0.1, total_iters=4)
        decay = S.CosineAnnealingLR(opt, T_max=10)
        sched = S.SequentialLR(opt, [warmup, decay], milestones=[4])
    elif kind == "sequential3":
        parts = [S.ConstantLR(opt, factor=0.5, total_iters=2), S.ExponentialLR(opt, gamma=0.9),
                 S.StepLR(opt, step_size=3, gamma=0.5)]
        sched = S.SequentialLR(opt, parts, milestones=[3, 9])
    else:
        sched = S.ChainedScheduler([S.ConstantLR(opt, factor=0.5, total_iters=3), S.ExponentialLR(opt, gamma=0.9)])
    out = [sched.get_last_lr()]
    for _ in range(20):
        opt.step()
        sched.step()
        out.append(sched.get_last_lr())
    return out, sched


@pytest.mark.parametrize("kind", ["sequential", "sequential3", "chained"])
def test_composed_schedulers_match_torch(kind):
    (k, ks), (t, ts) = _composed(kiln, kind), _composed(torch, kind)
    assert k == t
    assert len(ks.state_dict()["_schedulers"]) == len(ts.state_dict()["_schedulers"])


def test_warm_restarts_with_fractional_epochs_match_torch():
    def run(lib):
        opt = _optimizer(lib)
        sched = lib.optim.lr_scheduler.CosineAnnealingWarmRestarts(opt, T_0=4, T_mult=2)
        out = []
        for epoch in range(10):
            for i in range(3):
                opt.step()
                sched.step(epoch + i / 3)
                out.append(sched.get_last_lr())
        return out

    assert run(kiln) == run(torch)
