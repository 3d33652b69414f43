"""Cauchy, HalfNormal, HalfCauchy, Gumbel, Geometric, Pareto, Weibull (distributions/more.py),
the Abs/Power/Softplus transforms, Normal.icdf and TransformedDistribution's cdf/icdf through
decreasing transforms, against torch.distributions: the same draws after the same seed and the
same log_prob, moments, entropy, cdf and icdf."""
import numpy as np
import pytest

import kiln
from oracle import need_torch

torch = need_torch()
LOC = np.array([0.3, -1.0, 2.0], np.float32)
SCALE = np.array([0.5, 1.2, 2.0], np.float32)
PROBS = np.array([0.2, 0.5, 0.9], np.float32)
SPECS = {
    "Cauchy": (LOC, SCALE), "HalfNormal": (SCALE,), "HalfCauchy": (SCALE,), "Gumbel": (LOC, SCALE),
    "Geometric": (PROBS,), "Pareto": (SCALE, SCALE + 1.5), "Weibull": (SCALE, SCALE + 0.5), "LogNormal": (LOC, SCALE),
    "Normal": (LOC, SCALE), "InverseGamma": (SCALE + 2.0, SCALE), "Kumaraswamy": (SCALE + 0.2, SCALE + 1.0),
}


def _values(lib, name, args):
    lib.manual_seed(0)
    d = getattr(lib.distributions, name)(*[lib.from_numpy(a) for a in args])
    s = d.sample((4,))
    v = s if name == "Geometric" else s.abs() + 0.1 + (lib.from_numpy(SCALE) if name == "Pareto" else 0)
    if name == "Kumaraswamy":
        v = s.clamp(0.05, 0.95)
    out = [s, d.log_prob(v), d.mean, d.variance, d.entropy()]
    if name not in ("Geometric", "InverseGamma", "Kumaraswamy"):
        out += [d.cdf(v.clamp(max=5)), d.icdf(lib.tensor([0.3, 0.6, 0.9]))]
    return [t.numpy() for t in out]


@pytest.mark.parametrize("name", sorted(SPECS))
def test_distribution_as_torch(name):
    for got, want in zip(_values(kiln, name, SPECS[name]), _values(torch, name, SPECS[name])):
        assert got.shape == want.shape
        np.testing.assert_allclose(got, want, rtol=2e-6, atol=1e-6, equal_nan=True)


@pytest.mark.parametrize("name", ["Cauchy", "HalfNormal", "Gumbel", "Weibull"])
def test_rsample_and_log_prob_gradients_compiled(name):
    """rsample is differentiable in the parameters; log_prob compiles (one graph) and equals eager."""
    args = SPECS[name]
    grads = []
    for lib in (torch, kiln):
        lib.manual_seed(1)
        params = [lib.from_numpy(a.copy()).requires_grad_() for a in args]
        d = getattr(lib.distributions, name)(*params)
        (d.rsample((5,)) if d.has_rsample else d.sample((5,))).clamp(-10, 10).sum().backward()
        grads.append([p.grad.numpy() for p in params])
    for g, w in zip(*grads):
        np.testing.assert_allclose(g, w, rtol=1e-5, atol=1e-6)
    fn = lambda *ps: getattr(kiln.distributions, name)(*ps).log_prob(kiln.tensor([0.5, 1.0, 3.0]))  # noqa: E731
    params = [kiln.from_numpy(a) for a in args]
    np.testing.assert_allclose(kiln.compile(fn)(*params).numpy(), fn(*params).numpy(), rtol=1e-6)


def test_transforms_as_torch():
    x = kiln.tensor([0.5, 1.5, 3.0])
    tx = torch.tensor([0.5, 1.5, 3.0])
    T, TT = kiln.distributions.transforms, torch.distributions.transforms
    for make in (lambda M: M.PowerTransform(2.5), lambda M: M.SoftplusTransform(), lambda M: M.AbsTransform()):
        k, t = make(T), make(TT)
        np.testing.assert_allclose(k(x).numpy(), t(tx).numpy(), rtol=1e-6)
        np.testing.assert_allclose(k.inv(k(x)).numpy(), t.inv(t(tx)).numpy(), rtol=1e-5)
        if t.bijective:
            np.testing.assert_allclose(k.log_abs_det_jacobian(x, k(x)).numpy(),
                                       t.log_abs_det_jacobian(tx, t(tx)).numpy(), rtol=1e-5)
    # A decreasing affine map: cdf and icdf of the pushed-forward distribution as torch's.
    kd = kiln.distributions.TransformedDistribution(kiln.distributions.Normal(0.0, 1.0),
                                                    [T.AffineTransform(1.0, kiln.tensor([-2.0, 3.0]))])
    td = torch.distributions.TransformedDistribution(torch.distributions.Normal(0.0, 1.0),
                                                     [TT.AffineTransform(1.0, torch.tensor([-2.0, 3.0]))])
    np.testing.assert_allclose(kd.cdf(kiln.tensor([0.5, 0.5])).numpy(), td.cdf(torch.tensor([0.5, 0.5])).numpy(), rtol=1e-6)
    np.testing.assert_allclose(kd.icdf(kiln.tensor([0.2, 0.7])).numpy(), td.icdf(torch.tensor([0.2, 0.7])).numpy(), rtol=1e-6)


def test_poisson_and_relaxed_distributions_as_torch():
    """Poisson (torch.poisson's draws), RelaxedBernoulli and RelaxedOneHotCategorical (the
    Gumbel-softmax of VAE code) and their logit/log bases: same draws for a seed, same log_prob,
    reparametrized gradients equal."""
    from torch.distributions.relaxed_bernoulli import LogitRelaxedBernoulli
    from torch.distributions.relaxed_categorical import ExpRelaxedCategorical

    cases = [
        ("Poisson", lambda L: (L.tensor([1.5, 4.0, 20.0]),)),
        ("RelaxedBernoulli", lambda L: (L.tensor(0.7), L.tensor([0.2, 0.6]))),
        ("LogitRelaxedBernoulli", lambda L: (L.tensor([0.5, 2.0]), None, L.tensor([0.3, -1.0]))),
        ("RelaxedOneHotCategorical", lambda L: (L.tensor(0.5), None, L.tensor([[0.2, 1.3, -0.5], [0.6, 0.2, 0.2]]))),
        ("ExpRelaxedCategorical", lambda L: (L.tensor(1.5), L.tensor([[0.2, 0.3, 0.5], [0.6, 0.2, 0.2]]))),
    ]
    torch_classes = {"LogitRelaxedBernoulli": LogitRelaxedBernoulli, "ExpRelaxedCategorical": ExpRelaxedCategorical}
    for name, make in cases:
        out = []
        for lib in (torch, kiln):
            lib.manual_seed(0)
            cls = torch_classes.get(name, getattr(torch.distributions, name, None)) if lib is torch \
                else getattr(kiln.distributions, name)
            args = [a.requires_grad_() if a is not None and a.dtype.is_floating_point and a.dim() > 0 else a
                    for a in make(lib)]
            d = cls(*args)
            s = d.rsample((4,)) if d.has_rsample else d.sample((4,))
            lp = d.log_prob(s)
            values = [s.detach().numpy(), lp.detach().numpy()]
            if d.has_rsample:
                lp.sum().backward()
                values += [a.grad.numpy() for a in args if a is not None and a.requires_grad]
            out.append(values)
        for got, want in zip(out[1], out[0]):
            np.testing.assert_allclose(got, want, rtol=1e-5, atol=1e-6, err_msg=name)


def test_multinomial_as_torch():
    out = []
    for lib in (torch, kiln):
        lib.manual_seed(0)
        d = lib.distributions.Multinomial(10, lib.tensor([[0.2, 0.3, 0.5], [0.6, 0.2, 0.2]]))
        s = d.sample((3,))
        out.append([s.numpy(), d.log_prob(s).numpy(), d.mean.numpy(), d.variance.numpy()])
        assert tuple(d.batch_shape) == (2,) and tuple(d.event_shape) == (3,)
    for got, want in zip(*out[::-1]):
        np.testing.assert_allclose(got, want, rtol=1e-6)
    with pytest.raises(NotImplementedError, match="inhomogeneous total_count"):
        kiln.distributions.Multinomial(kiln.tensor([3, 4]), kiln.tensor([0.5, 0.5]))


def test_low_rank_multivariate_normal_as_torch():
    """LowRankMultivariateNormal: torch's two draws, log_prob/entropy through the capacitance
    matrix, the covariance forms, gradients to loc, cov_factor and cov_diag."""
    rng = np.random.default_rng(0)
    arrays = (rng.standard_normal((2, 4)).astype(np.float32), rng.standard_normal((4, 2)).astype(np.float32),
              (rng.random(4) + 0.5).astype(np.float32))
    out = []
    for lib in (torch, kiln):
        lib.manual_seed(0)
        args = [lib.from_numpy(a.copy()).requires_grad_() for a in arrays]
        d = lib.distributions.LowRankMultivariateNormal(*args)
        s = d.rsample((3,))
        lp, ent = d.log_prob(s), d.entropy()
        (lp.sum() + ent.sum()).backward()
        out.append([t.detach().numpy() for t in (s, lp, ent, d.variance, d.scale_tril, d.covariance_matrix,
                                                  d.precision_matrix)] + [a.grad.numpy() for a in args])
        assert tuple(d.batch_shape) == (2,) and tuple(d.event_shape) == (4,)
    for got, want in zip(out[1], out[0]):
        np.testing.assert_allclose(got, want, rtol=1e-5, atol=1e-5)
    with pytest.raises(ValueError, match="cov_factor must be a batch of matrices"):
        kiln.distributions.LowRankMultivariateNormal(kiln.zeros(4), kiln.ones(3, 2), kiln.ones(4))


def test_exponential_family_base_as_torch():
    """ExponentialFamily is the base of the same distributions as torch's (isinstance checks in
    model code), and its generic entropy (Bregman divergence of the log-normalizer) is torch's."""
    for name, args in (("Normal", (0.0, 1.0)), ("Bernoulli", (0.3,)), ("Gamma", (2.0, 1.0)), ("Beta", (2.0, 3.0)),
                       ("Exponential", (1.5,)), ("Poisson", (2.0,)), ("Chi2", (3.0,)), ("Categorical", (kiln.ones(3),)),
                       ("Uniform", (0.0, 1.0)), ("Laplace", (0.0, 1.0))):
        k = getattr(kiln.distributions, name)(*args)
        t = getattr(torch.distributions, name)(*[torch.ones(3) if isinstance(a, kiln.Tensor) else a for a in args])
        assert isinstance(k, kiln.distributions.ExponentialFamily) == isinstance(t, torch.distributions.ExponentialFamily), name

    class Exp(kiln.distributions.ExponentialFamily):  # rate parametrized: theta = -rate, F = -log(-theta)
        def __init__(self, rate):
            self.rate = rate
            super().__init__(rate.shape)

        @property
        def _natural_params(self):
            return (-self.rate,)

        def _log_normalizer(self, x):
            return -(-x).log()

        @property
        def _mean_carrier_measure(self):
            return 0

    rate = kiln.tensor([0.5, 2.0])
    np.testing.assert_allclose(Exp(rate).entropy().detach().numpy(),
                               kiln.distributions.Exponential(rate).entropy().numpy(), rtol=1e-6)
