"""A GAN training step: the discriminator step on real and detached fake samples, then the
generator step through the discriminator with its own optimizer; requires_grad_ toggling on the
discriminator as DCGAN-style code does it."""
from cutil import init_module, randn, rng

TAGS = ["training", "autograd", "nn", "tier2"]
RTOL, ATOL = 1e-3, 1e-4


def build(T):
    nn, F = T.nn, T.nn.functional
    G = init_module(T, nn.Sequential(nn.Linear(4, 16), nn.LeakyReLU(0.2), nn.Linear(16, 8),
                                     nn.Tanh()))
    D = init_module(T, nn.Sequential(nn.Linear(8, 16), nn.LeakyReLU(0.2), nn.Linear(16, 1)),
                    seed=1)
    opt_g = T.optim.Adam(G.parameters(), lr=2e-3, betas=(0.5, 0.999))
    opt_d = T.optim.Adam(D.parameters(), lr=2e-3, betas=(0.5, 0.999))

    def step(real, z):
        fake = G(z)
        opt_d.zero_grad()
        d_real, d_fake = D(real), D(fake.detach())
        loss_d = (F.binary_cross_entropy_with_logits(d_real, T.ones_like(d_real))
                  + F.binary_cross_entropy_with_logits(d_fake, T.zeros_like(d_fake)))
        loss_d.backward()
        opt_d.step()
        for p in D.parameters():
            p.requires_grad_(False)
        opt_g.zero_grad()
        d_gen = D(fake)
        loss_g = F.binary_cross_entropy_with_logits(d_gen, T.ones_like(d_gen))
        loss_g.backward()
        opt_g.step()
        for p in D.parameters():
            p.requires_grad_(True)
        return loss_d.detach(), loss_g.detach(), G[0].weight.detach().clone(), D[2].bias.detach().clone()

    r = rng(107)
    return step, [(randn(T, r, 8, 8), randn(T, r, 8, 4)) for _ in range(3)]
