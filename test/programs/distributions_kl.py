"""torch.distributions as probabilistic models use it: Normal / Independent / Bernoulli /
Categorical / Beta-free log_prob and entropy, kl_divergence between Normals and between
Categoricals, rsample with the noise passed in via loc + scale * eps, a backward."""
from cutil import randn, rng

TAGS = ["distributions", "autograd", "tier2"]
RTOL, ATOL = 1e-4, 1e-5


def build(T):
    D = T.distributions

    def fn(mu, log_sigma, logits, x, eps):
        q = D.Normal(mu, log_sigma.exp())
        p = D.Normal(T.zeros_like(mu), T.ones_like(mu))
        z = q.loc + q.scale * eps
        kl = D.kl_divergence(q, p).sum(-1)
        indep = D.Independent(D.Normal(mu, log_sigma.exp()), 1)
        lp = indep.log_prob(z)
        bern = D.Bernoulli(logits=logits)
        b_lp = bern.log_prob((x > 0).float()).sum(-1)
        cat_q = D.Categorical(logits=logits)
        cat_p = D.Categorical(probs=T.softmax(x, -1))
        kl_cat = D.kl_divergence(cat_q, cat_p)
        ent = cat_q.entropy() + bern.entropy().sum(-1) + q.entropy().sum(-1)
        loss = (kl - lp - b_lp + kl_cat - 0.1 * ent).mean()
        g_mu, g_ls = T.autograd.grad(loss, [mu, log_sigma])
        return kl, lp, b_lp, kl_cat, ent, bern.probs, cat_q.probs, g_mu, g_ls

    r = rng(110)
    return fn, [(randn(T, r, 4, 3, requires_grad=True), randn(T, r, 4, 3, requires_grad=True, scale=0.3),
                 randn(T, r, 4, 3), randn(T, r, 4, 3), randn(T, r, 4, 3))]
