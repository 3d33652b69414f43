"""Uniform, Laplace, MultivariateNormal (covariance / precision / scale_tril) and their KL
divergences against torch.distributions after the same manual_seed: samples, log_prob, entropy,
cdf/icdf, moments, and gradients of log_prob and rsample wrt the parameters."""
import numpy as np
import pytest

import kiln

torch = pytest.importorskip("torch")

COV = [[2.0, 0.5, 0.1], [0.5, 1.0, 0.2], [0.1, 0.2, 1.5]]


def _run(T):
    T.manual_seed(0)
    D = T.distributions
    out = []
    lo, hi = T.tensor([0.0, 1.0], requires_grad=True), T.tensor([2.0, 3.0], requires_grad=True)
    u = D.Uniform(lo, hi)
    s = u.rsample((3,))
    out += [s, u.log_prob(s.detach()), u.entropy(), u.cdf(s), u.mean, u.variance]
    loc, scale = T.tensor([0.0, 1.0], requires_grad=True), T.tensor([1.0, 0.5], requires_grad=True)
    lap = D.Laplace(loc, scale)
    s = lap.rsample((4,))
    out += [s, lap.log_prob(s), lap.entropy(), lap.cdf(s), lap.icdf(T.tensor([0.3, 0.7]))]
    mu, cov = T.zeros(3, requires_grad=True), T.tensor(COV, requires_grad=True)
    m = D.MultivariateNormal(mu, covariance_matrix=cov)
    s = m.rsample((5,))
    out += [s, m.log_prob(s), m.entropy(), m.scale_tril, m.precision_matrix, m.variance]
    m2 = D.MultivariateNormal(T.ones(2, 3), precision_matrix=T.tensor(COV))
    m3 = D.MultivariateNormal(T.ones(3), scale_tril=m.scale_tril.detach())
    out += [m2.log_prob(T.zeros(3)), m2.covariance_matrix, m3.log_prob(T.zeros(2, 3)), D.kl_divergence(m, m2),
            D.kl_divergence(u, D.Uniform(-1.0, 4.0)), D.kl_divergence(lap, D.Laplace(0.5, 2.0))]
    sum(o.sum() for o in out if o.requires_grad).backward()
    return out + [lo.grad, hi.grad, loc.grad, scale.grad, mu.grad, cov.grad]


def test_match_torch():
    for i, (a, b) in enumerate(zip(_run(kiln), _run(torch))):
        assert tuple(a.shape) == tuple(b.shape), i
        np.testing.assert_allclose(a.detach().numpy(), b.detach().numpy(), rtol=1e-5, atol=1e-5, err_msg=str(i))


def test_errors():
    D = kiln.distributions
    with pytest.raises(ValueError, match="Exactly one of"):
        D.MultivariateNormal(kiln.zeros(2))
    with pytest.raises(ValueError, match="LessThan"):
        D.Uniform(kiln.tensor([1.0]), kiln.tensor([0.0]))
    with pytest.raises(kiln.linalg.LinAlgError, match="positive-definite"):
        D.MultivariateNormal(kiln.zeros(2), covariance_matrix=-kiln.eye(2))
