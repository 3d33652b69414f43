"""Reparameterised sampling with torch.distributions after manual_seed in the function:
MultivariateNormal(scale_tril) rsample and log_prob, Normal rsample, RelaxedOneHotCategorical-free
Gumbel-softmax (F.gumbel_softmax, hard=True straight-through), Categorical sample; the ELBO-like
loss's gradients reach the parameters through the samples."""
from cutil import randn, rng

TAGS = ["distributions", "autograd", "random", "tier2"]
RTOL, ATOL = 1e-4, 1e-5


def build(T):
    D = T.distributions
    F = T.nn.functional

    def fn(mu, raw_l, logits):
        T.manual_seed(1234)
        L = T.tril(raw_l, diagonal=-1) + T.diag_embed(F.softplus(raw_l.diagonal(dim1=-2, dim2=-1)))
        mvn = D.MultivariateNormal(mu, scale_tril=L)
        z = mvn.rsample((5,))
        lp = mvn.log_prob(z)
        nrm = D.Normal(mu, F.softplus(mu) + 0.1)
        s = nrm.rsample()
        g = F.gumbel_softmax(logits, tau=0.7, hard=True)
        soft = F.gumbel_softmax(logits, tau=1.5)
        cat = D.Categorical(logits=logits).sample((3,))
        loss = -lp.mean() + (z ** 2).mean() + s.sum() + (g * T.arange(4.0)).sum() + soft.max()
        g_mu, g_l, g_logits = T.autograd.grad(loss, [mu, raw_l, logits])
        return z.detach(), lp.detach(), s.detach(), g.detach(), soft.detach(), cat, mvn.covariance_matrix.detach(), \
            mvn.entropy().detach(), g_mu, g_l, g_logits

    r = rng(167)
    return fn, [(randn(T, r, 2, 3, requires_grad=True), randn(T, r, 2, 3, 3, requires_grad=True, scale=0.5),
                 randn(T, r, 2, 4, requires_grad=True))]
