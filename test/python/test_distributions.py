"""kiln.distributions against torch.distributions: log_prob, entropy, KL, shapes, reprs, argument
and value validation, sample statistics and rsample gradients."""
import numpy as np
import pytest

import kiln
from oracle import assert_match, both, need_torch, sample

K = kiln.distributions
TOL = dict(rtol=1e-5, atol=1e-6)


def dists(torch, seed=0):
    """The same distributions in both libraries: (name, kiln, torch, a value in the support)."""
    logits = sample((3, 4), "float32", seed=seed, low=-2, high=2)
    (kl, tl), (kp, tp) = both(logits), both(np.exp(logits))
    (kloc, tloc), (ksc, tsc) = both(logits), both(np.exp(logits[:, :2]).repeat(2, 1))
    (ka, ta) = both(np.array([0, 3, 1]))
    (kx, tx) = both(sample((3, 4), "float32", seed=seed + 1))
    (kb, tb) = both((sample((3, 4), "float32", seed=seed + 2) > 0).astype(np.float32))
    T = torch.distributions
    return [
        ("categorical-logits", K.Categorical(logits=kl), T.Categorical(logits=tl), (ka, ta)),
        ("categorical-probs", K.Categorical(probs=kp), T.Categorical(probs=tp), (ka, ta)),
        ("normal", K.Normal(kloc, ksc), T.Normal(tloc, tsc), (kx, tx)),
        ("normal-scalar-scale", K.Normal(kloc, 0.5), T.Normal(tloc, 0.5), (kx, tx)),
        ("bernoulli-probs", K.Bernoulli(probs=kl.sigmoid()), T.Bernoulli(probs=tl.sigmoid()), (kb, tb)),
        ("bernoulli-logits", K.Bernoulli(logits=kl), T.Bernoulli(logits=tl), (kb, tb)),
        ("independent-normal", K.Independent(K.Normal(kloc, ksc), 1), T.Independent(T.Normal(tloc, tsc), 1),
         (kx, tx)),
    ]


def test_log_prob_entropy_shapes_and_repr_match_torch():
    torch = need_torch()
    for name, kd, td, (kv, tv) in dists(torch):
        assert repr(kd).replace("kiln", "torch") == repr(td), name
        assert tuple(kd.batch_shape) == tuple(td.batch_shape) and tuple(kd.event_shape) == tuple(td.event_shape)
        assert_match(kd.log_prob(kv), td.log_prob(tv), **TOL)
        assert_match(kd.entropy(), td.entropy(), **TOL)
        if not name.startswith("categorical"):
            assert_match(kd.mean, td.mean, **TOL)
            assert_match(kd.variance, td.variance, **TOL)
        assert tuple(kd.sample((5, 2)).shape) == tuple(td.sample((5, 2)).shape), name
    for (name, kp, tp, _), (_, kq, tq, _) in zip(dists(torch, 0), dists(torch, 10)):
        assert_match(K.kl_divergence(kp, kq), torch.distributions.kl_divergence(tp, tq), **TOL)


def test_sample_statistics_and_rsample_gradient():
    kiln.manual_seed(0)
    probs = kiln.tensor([0.1, 0.6, 0.3])
    counts = np.bincount(K.Categorical(probs=probs).sample((20000,)).numpy(), minlength=3) / 20000
    np.testing.assert_allclose(counts, [0.1, 0.6, 0.3], atol=0.02)
    assert abs(K.Bernoulli(probs=kiln.full((20000,), 0.3)).sample().mean().item() - 0.3) < 0.02
    loc, scale = kiln.tensor([1.0, -2.0], requires_grad=True), kiln.tensor([0.5, 2.0], requires_grad=True)
    d = K.Normal(loc, scale)
    x = d.rsample((20000,))
    np.testing.assert_allclose(x.mean(0).detach().numpy(), [1.0, -2.0], atol=0.05)
    np.testing.assert_allclose(x.std(0).detach().numpy(), [0.5, 2.0], rtol=0.03)
    x.mean().backward()  # d(loc + eps * scale)/dloc = 1
    np.testing.assert_allclose(loc.grad.numpy(), [0.5, 0.5], rtol=1e-6)
    assert d.sample().requires_grad is False
    with pytest.raises(NotImplementedError, match="Categorical has no reparameterized sampling"):
        K.Categorical(probs=probs).rsample()


def test_log_prob_gradients_match_torch():
    torch = need_torch()
    (kl, tl), (ka, ta) = both(sample((4, 5), "float64", seed=3)), both(np.array([0, 4, 2, 2]))
    for t in (kl, tl):
        t.requires_grad_(True)
    kd, td = K.Categorical(logits=kl), torch.distributions.Categorical(logits=tl)
    (kd.log_prob(ka).sum() + kd.entropy().sum()).backward()
    (td.log_prob(ta).sum() + td.entropy().sum()).backward()
    assert_match(kl.grad, tl.grad)


def test_validation_errors_match_torch():
    torch = need_torch()
    # validate_args=True: once TorchDynamo is set up (another test compiled), it turns torch's
    # default validation off (torch/_dynamo/eval_frame.py).
    on = dict(validate_args=True)
    for lib in (kiln, torch):
        D = lib.distributions
        with pytest.raises(ValueError, match="Either `probs` or `logits` must be specified, but not both."):
            D.Categorical()
        with pytest.raises(ValueError, match="Expected parameter scale .* to satisfy the constraint GreaterThan"):
            D.Normal(lib.zeros(2), lib.tensor([1.0, -1.0]), **on)
        with pytest.raises(ValueError, match="Expected value argument .* to be within the support "
                                             "\\(IntegerInterval\\(lower_bound=0, upper_bound=2\\)\\)"):
            D.Categorical(logits=lib.zeros(2, 3), **on).log_prob(lib.tensor([0, 5]))
        with pytest.raises(ValueError, match="Expected value argument .* support \\(Boolean\\(\\)\\)"):
            D.Bernoulli(probs=lib.full((2,), 0.5), **on).log_prob(lib.tensor([0.0, 0.5]))
        D.Normal(lib.zeros(2), lib.tensor([1.0, -1.0]), validate_args=False)  # no check when asked not to


def test_broadcast_of_zero_dim_tensors():
    """Regression: broadcast_tensors/broadcast_to of 0-d tensors called expand() with no sizes
    (Normal(0.0, 1.0) failed)."""
    a, b = kiln.broadcast_tensors(kiln.tensor(1.0), kiln.tensor(2.0))
    assert a.shape == () and b.item() == 2.0
    assert kiln.broadcast_to(kiln.tensor(3.0), ()).item() == 3.0
    d = K.Normal(0.0, 1.0)
    assert d.batch_shape == () and abs(d.log_prob(kiln.tensor(0.0)).item() + 0.9189385) < 1e-6


def policy_loss(logits, actions, advantages, mu, log_std, x, mu_old):
    """A PPO/VAE-style loss over every distribution (their objects made inside compiled code)."""
    pi = K.Categorical(logits=logits)
    normal = K.Independent(K.Normal(mu, log_std.exp()), 1)
    bern = K.Bernoulli(logits=logits[:, 0])
    kl = K.kl_divergence(K.Normal(mu, log_std.exp()), K.Normal(mu_old, kiln.ones_like(mu_old))).sum(-1)
    size = kiln.Size((logits.shape[0],))  # a Size of constants: a constant of the graph
    return (-(pi.log_prob(actions) * advantages).mean() - 0.01 * pi.entropy().mean() - normal.log_prob(x).mean()
            + bern.entropy().mean() + kl.mean() + logits.new_zeros(size).sum())


def test_distributions_compile_into_one_graph_like_torch():
    """torch.compile traces torch.distributions into one graph; kiln.compile traces kiln's too
    (1 graph, 0 breaks) and the loss and its gradients equal eager's."""
    arrays = [sample((6, 3), "float32", seed=30), np.array([0, 2, 1, 1, 0, 2]), sample((6,), "float32", seed=31),
              sample((6, 2), "float32", seed=32), sample((6, 2), "float32", seed=33, low=-1, high=1),
              sample((6, 2), "float32", seed=34), sample((6, 2), "float32", seed=35)]
    results = {}
    for mode in ("eager", "compiled"):
        inputs = [kiln.from_numpy(a.copy()) for a in arrays]
        for i in (0, 3, 4):
            inputs[i].requires_grad_(True)
        fn = policy_loss if mode == "eager" else kiln.compile(policy_loss)
        loss = fn(*inputs)
        loss.backward()
        results[mode] = [loss.item()] + [inputs[i].grad.numpy() for i in (0, 3, 4)]
    for a, b in zip(results["compiled"], results["eager"]):
        np.testing.assert_allclose(a, b, rtol=1e-5, atol=1e-6)
    explained = kiln.compiler.explain(policy_loss)(*[kiln.from_numpy(a.copy()) for a in arrays])
    assert (explained.graph_count, explained.graph_break_count) == (1, 0), explained.break_reasons


def test_samples_equal_torch_for_a_seed():
    """With torch's generator, a distribution's draws after manual_seed are torch's (an RL or VAE
    script seeded once makes the same rollouts and samples)."""
    torch = need_torch()

    def draws(T):
        T.manual_seed(0)
        D = T.distributions
        return (D.Normal(T.zeros(3), T.ones(3) * 2).sample().tolist(),
                D.Normal(T.zeros(3), T.ones(3)).rsample((2,)).tolist(),
                D.Categorical(probs=T.tensor([0.2, 0.3, 0.5])).sample((6,)).tolist(),
                D.Categorical(logits=T.tensor([[0.1, 2.0], [1.0, -1.0]])).sample().tolist(),
                D.Bernoulli(T.tensor([0.3, 0.6, 0.9])).sample((2,)).tolist())

    assert draws(kiln) == draws(torch)
