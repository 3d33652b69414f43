"""Gamma, Chi2, StudentT, Beta and Dirichlet against torch.distributions: the same samples after
the same manual_seed (torch's gamma and Dirichlet samplers reproduced draw for draw), log_prob,
entropy, moments, reparameterized gradients and KL divergences."""
import numpy as np
import pytest

import kiln
from oracle import assert_match, both, need_torch, sample

D = kiln.distributions


def params(shape, seed, low, high, dtype="float64"):
    return both(sample(shape, dtype, seed, low, high), dtype)


def dists(torch, name, *args):
    kargs = [a[0] if isinstance(a, tuple) else a for a in args]
    targs = [a[1] if isinstance(a, tuple) else a for a in args]
    return getattr(D, name)(*kargs), getattr(torch.distributions, name)(*targs)


@pytest.mark.parametrize("dtype", ["float32", "float64"])
def test_gamma_samples_equal_torchs_bit_for_bit(dtype):
    torch = need_torch()
    # Concentrations below 1 (the boost), around 1 and large (few rejections).
    conc = params((3, 5), 1, 0.05, 6.0, dtype)
    rate = params((3, 5), 2, 0.5, 2.0, dtype)
    kd, td = dists(torch, "Gamma", conc, rate)
    kiln.manual_seed(123)
    torch.manual_seed(123)
    assert_match(kd.sample((4,)), td.sample((4,)), rtol=0, atol=0)
    # The stream stays in step afterwards (the normal cache included).
    assert_match(kiln.randn(3, dtype=getattr(kiln, dtype)), torch.randn(3, dtype=getattr(torch, dtype)), rtol=0,
                 atol=0)


def test_dirichlet_beta_chi2_studentt_samples_equal_torchs():
    torch = need_torch()
    for dtype in ("float32", "float64"):
        conc = params((2, 4), 3, 0.2, 3.0, dtype)
        first, second = (conc[0][:, 0], conc[1][:, 0]), (conc[0][:, 1], conc[1][:, 1])
        for name, args in (("Dirichlet", (conc,)), ("Beta", (first, second)), ("Chi2", (conc,)),
                           ("StudentT", (conc, 0.5, 2.0))):
            kd, td = dists(torch, name, *args)
            kiln.manual_seed(7)
            torch.manual_seed(7)
            assert_match(kd.sample((3,)), td.sample((3,)), rtol=0, atol=0)


def test_scalar_parameters():
    torch = need_torch()
    for name, args in (("Gamma", (2.0, 3.0)), ("Beta", (0.5, 0.7)), ("Chi2", (3.0,)), ("StudentT", (4.0,))):
        kd, td = getattr(D, name)(*args), getattr(torch.distributions, name)(*args)
        assert kd.batch_shape == td.batch_shape
        kiln.manual_seed(9)
        torch.manual_seed(9)
        assert_match(kd.sample((5,)), td.sample((5,)), rtol=0, atol=0)


def test_log_prob_entropy_and_moments():
    torch = need_torch()
    a, b = params((3, 4), 4, 0.3, 4.0), params((3, 4), 5, 0.3, 4.0)
    x01 = params((3, 4), 6, 0.05, 0.95)
    xpos = params((3, 4), 7, 0.1, 5.0)
    simplex = both(np.random.default_rng(8).dirichlet(np.ones(4), size=3))
    cases = [("Gamma", (a, b), xpos), ("Chi2", (a,), xpos), ("StudentT", (a, b, a), xpos), ("Beta", (a, b), x01),
             ("Dirichlet", (a,), simplex)]
    for name, args, value in cases:
        kd, td = dists(torch, name, *args)
        assert_match(kd.log_prob(value[0]), td.log_prob(value[1]), rtol=1e-10, atol=1e-10)
        assert_match(kd.entropy(), td.entropy(), rtol=1e-10, atol=1e-10)
        for prop in ("mean", "variance"):
            assert_match(getattr(kd, prop), getattr(td, prop), rtol=1e-10, atol=1e-10)
        assert kd.batch_shape == td.batch_shape and kd.event_shape == td.event_shape


@pytest.mark.parametrize("name", ["Gamma", "Chi2", "StudentT", "Beta", "Dirichlet"])
def test_rsample_gradients_match_torch(name):
    torch = need_torch()
    a, b = params((2, 3), 10, 0.3, 12.0), params((2, 3), 11, 0.5, 3.0)
    for t in (a[0], a[1], b[0], b[1]):
        t.requires_grad_(True)
    args = {"Gamma": (a, b), "Chi2": (a,), "StudentT": (a, 0.0, b), "Beta": (a, b), "Dirichlet": (a,)}[name]
    kd, td = dists(torch, name, *args)
    kiln.manual_seed(5)
    torch.manual_seed(5)
    ks, ts = kd.rsample((4,)), td.rsample((4,))
    assert_match(ks.detach(), ts.detach(), rtol=0, atol=0)
    w = sample(tuple(ts.shape), "float64", 12)
    (ks * kiln.from_numpy(w)).sum().backward()
    (ts * torch.from_numpy(w)).sum().backward()
    assert_match(a[0].grad, a[1].grad, rtol=1e-6, atol=1e-8)
    if name in ("Gamma", "StudentT", "Beta"):
        assert_match(b[0].grad, b[1].grad, rtol=1e-6, atol=1e-8)


def test_kl_divergences():
    torch = need_torch()
    a, b, c, d = (params((3,), s, 0.3, 4.0) for s in (13, 14, 15, 16))
    for name, p_args, q_args in (("Gamma", (a, b), (c, d)), ("Beta", (a, b), (c, d)),
                                 ("Dirichlet", (a,), (c,))):
        kp, tp = dists(torch, name, *p_args)
        kq, tq = dists(torch, name, *q_args)
        assert_match(D.kl_divergence(kp, kq), torch.distributions.kl_divergence(tp, tq), rtol=1e-10, atol=1e-10)
    kp, tp = dists(torch, "Chi2", a)
    kq, tq = dists(torch, "Gamma", c, d)
    assert_match(D.kl_divergence(kp, kq), torch.distributions.kl_divergence(tp, tq), rtol=1e-10, atol=1e-10)


def test_invalid_parameters_raise_value_error():
    with pytest.raises(ValueError, match="concentration"):
        D.Gamma(kiln.tensor([-1.0]), kiln.tensor([1.0]))
    with pytest.raises(ValueError, match="at least one-dimensional"):
        D.Dirichlet(kiln.tensor(1.0))
    with pytest.raises(ValueError, match="support"):
        D.Beta(kiln.tensor([1.0]), kiln.tensor([1.0])).log_prob(kiln.tensor([1.5]))


def test_under_compile():
    torch = need_torch()

    def loss(T, conc, rate, x):
        d = T.distributions.Gamma(conc, rate)
        return -d.log_prob(x).mean() + d.entropy().sum()

    (kc, tc), (kr, tr), (kx, tx) = params((4,), 20, 0.5, 3.0), params((4,), 21, 0.5, 2.0), params((4,), 22, 0.1, 3.0)
    compiled = kiln.compile(lambda c, r, x: loss(kiln, c, r, x))
    assert_match(compiled(kc, kr, kx), loss(torch, tc, tr, tx), rtol=1e-10, atol=1e-10)
    explain = kiln.explain(lambda c, r, x: loss(kiln, c, r, x))(kc, kr, kx)
    assert explain.graph_break_count == 0, explain.break_reasons

    def draw(conc):
        return D.Gamma(conc, 1.0).rsample((2,)) * 2
    kiln.manual_seed(3)
    torch.manual_seed(3)
    assert_match(kiln.compile(draw)(kc), torch.distributions.Gamma(tc, 1.0).rsample((2,)) * 2, rtol=0, atol=0)
