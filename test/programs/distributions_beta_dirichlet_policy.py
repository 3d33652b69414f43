"""Continuous-action and simplex policies as RL / topic-model code writes them: a Beta policy
(softplus + 1 concentrations from a network) with seeded rsample, log_prob, entropy and mean;
a Dirichlet over mixture weights with rsample and log_prob; Gamma and StudentT log-likelihoods,
a Laplace scale; kl_divergence between Betas and between Dirichlets; gradients to the network."""
from cutil import init_module, randn, rng

TAGS = ["distributions", "autograd", "random", "tier2"]
RTOL, ATOL = 1e-4, 1e-5


def build(T):
    D = T.distributions
    F = T.nn.functional
    net = init_module(T, T.nn.Linear(3, 4), seed=24)

    def fn(obs, y):
        T.manual_seed(42)
        out = F.softplus(net(obs)) + 1.0
        a, b = out[:, 0], out[:, 1]
        pi = D.Beta(a, b)
        act = pi.rsample()
        lp = pi.log_prob(act.clamp(1e-4, 1 - 1e-4))
        ent = pi.entropy()
        dir_ = D.Dirichlet(out[:, 1:])
        w = dir_.rsample()
        dlp = dir_.log_prob(w)
        gam = D.Gamma(a, b).log_prob(y.abs() + 0.1)
        st = D.StudentT(df=3.0, loc=a, scale=b).log_prob(y)
        lap = D.Laplace(a, b).log_prob(y)
        kl1 = D.kl_divergence(pi, D.Beta(T.ones_like(a) * 2, T.ones_like(b) * 2))
        kl2 = D.kl_divergence(dir_, D.Dirichlet(T.ones_like(out[:, 1:])))
        loss = -(lp * act.detach()).mean() - 0.01 * ent.mean() + dlp.mean() - gam.mean() - st.mean() - lap.mean() \
            + kl1.mean() + kl2.mean() + (act ** 2).mean() + w.pow(2).sum(-1).mean()
        gw, gb = T.autograd.grad(loss, [net.weight, net.bias])
        return act.detach(), lp.detach(), ent.detach(), pi.mean.detach(), w.detach(), dlp.detach(), gam.detach(), \
            st.detach(), lap.detach(), kl1.detach(), kl2.detach(), gw, gb

    r = rng(185)
    return fn, [(randn(T, r, 5, 3), randn(T, r, 5))]
