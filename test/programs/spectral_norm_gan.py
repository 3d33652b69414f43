"""A spectrally normalised GAN discriminator (SN-GAN): nn.utils.spectral_norm on a Conv2d and
nn.utils.parametrizations.spectral_norm on Linear layers (power iteration in training mode,
the u/v buffers updated each forward; eval mode reuses them), a hinge loss, one Adam step; the
normalised weight's top singular value is ~1."""
from cutil import init_module, randn, rng

TAGS = ["nn", "training", "parametrize", "tier2"]
RTOL, ATOL = 1e-4, 1e-5


def build(T):
    T.manual_seed(5)   # the u vectors start random
    sn, psn = T.nn.utils.spectral_norm, T.nn.utils.parametrizations.spectral_norm
    conv = init_module(T, T.nn.Conv2d(3, 4, 3, stride=2, padding=1), seed=17)
    fc1 = init_module(T, T.nn.Linear(4 * 4 * 4, 16), seed=18)
    fc2 = init_module(T, T.nn.Linear(16, 1), seed=19)
    disc = T.nn.Sequential(sn(conv), T.nn.LeakyReLU(0.2), T.nn.Flatten(), psn(fc1, n_power_iterations=2),
                           T.nn.LeakyReLU(0.2), psn(fc2))
    opt = T.optim.Adam(disc.parameters(), lr=2e-4, betas=(0.0, 0.9))

    def fn(real, fake):
        disc.train()
        loss = T.relu(1.0 - disc(real)).mean() + T.relu(1.0 + disc(fake)).mean()
        opt.zero_grad()
        loss.backward()
        opt.step()
        disc.eval()
        with T.no_grad():
            score = disc(real)
            w = disc[3].weight
        return loss.detach(), score, w.clone(), disc[0].weight_u.clone(), disc[0].weight_orig.detach().clone(), \
            disc[3].parametrizations.weight.original.detach().clone()

    r = rng(179)
    return fn, [(randn(T, r, 2, 3, 8, 8), randn(T, r, 2, 3, 8, 8)), (randn(T, r, 2, 3, 8, 8), randn(T, r, 2, 3, 8, 8))]
