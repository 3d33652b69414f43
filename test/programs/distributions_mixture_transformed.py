"""Mixture density networks and squashed Gaussian policies (SAC): MixtureSameFamily of
Normals with Categorical logits from a network (log_prob of targets, mean, variance), a
TransformedDistribution of a Normal through TanhTransform (log_prob of tanh-squashed actions with
the Jacobian correction), Exponential and LogNormal log-likelihoods, OneHotCategorical samples
after manual_seed; gradients to the network."""
from cutil import init_module, randn, rng

TAGS = ["distributions", "autograd", "random", "tier2"]
RTOL, ATOL = 1e-4, 1e-5


def build(T):
    D = T.distributions
    F = T.nn.functional
    K = 3
    net = init_module(T, T.nn.Linear(2, 3 * K), seed=25)

    def fn(x, y):
        T.manual_seed(9)
        logits, mu, raw = net(x).chunk(3, dim=-1)
        mix = D.MixtureSameFamily(D.Categorical(logits=logits), D.Normal(mu, F.softplus(raw) + 1e-3))
        nll = -mix.log_prob(y).mean()
        base = D.Normal(mu[:, 0], F.softplus(raw[:, 0]) + 0.1)
        squashed = D.TransformedDistribution(base, [D.transforms.TanhTransform(cache_size=1)])
        a = squashed.rsample()
        lp_a = squashed.log_prob(a)
        expo = D.Exponential(F.softplus(mu[:, 1]) + 0.1).log_prob(y.abs())
        logn = D.LogNormal(mu[:, 2], F.softplus(raw[:, 2]) + 0.1).log_prob(y.abs() + 0.5)
        oh = D.OneHotCategorical(logits=logits).sample()
        loss = nll - lp_a.mean() - expo.mean() - logn.mean() + a.pow(2).mean()
        gw, = T.autograd.grad(loss, [net.weight])
        return nll.detach(), mix.mean.detach(), mix.variance.detach(), a.detach(), lp_a.detach(), expo.detach(), \
            logn.detach(), oh, gw

    r = rng(186)
    return fn, [(randn(T, r, 6, 2), randn(T, r, 6))]
