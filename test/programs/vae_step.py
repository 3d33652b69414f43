"""A VAE training step: encoder to mean/logvar, reparameterization with given noise, BCE
reconstruction + KL divergence, backward, Adam."""
from cutil import init_module, randn, rng

TAGS = ["training", "autograd", "nn", "tier2"]
RTOL, ATOL = 1e-3, 1e-4


def build(T):
    nn, F = T.nn, T.nn.functional

    class VAE(nn.Module):
        def __init__(self):
            super().__init__()
            self.enc = nn.Linear(12, 16)
            self.mu, self.logvar = nn.Linear(16, 4), nn.Linear(16, 4)
            self.dec = nn.Sequential(nn.Linear(4, 16), nn.ReLU(), nn.Linear(16, 12))

        def forward(self, x, eps):
            h = F.relu(self.enc(x))
            mu, logvar = self.mu(h), self.logvar(h)
            z = mu + eps * T.exp(0.5 * logvar)
            return self.dec(z), mu, logvar

    model = init_module(T, VAE())
    opt = T.optim.Adam(model.parameters(), lr=1e-2)
    r = rng(22)
    x = randn(T, r, 8, 12).sigmoid()

    def step(x, eps):
        opt.zero_grad()
        logits, mu, logvar = model(x, eps)
        rec = F.binary_cross_entropy_with_logits(logits, x, reduction="sum")
        kl = -0.5 * T.sum(1 + logvar - mu.pow(2) - logvar.exp())
        loss = (rec + kl) / x.shape[0]
        loss.backward()
        opt.step()
        return loss.detach(), kl.detach(), model.mu.weight.detach().clone()

    return step, [(x, randn(T, r, 8, 4)) for _ in range(3)]
