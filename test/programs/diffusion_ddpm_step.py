"""A DDPM training step's forward: a linear beta schedule in buffers, alphas_cumprod gathered by
a timestep tensor, q_sample, a small UNet-like conv denoiser with a timestep embedding, and the
MSE loss against the noise."""
import math

from cutil import init_module, randint, randn, rng

TAGS = ["tier2", "nn", "conv", "diffusion"]
RTOL = 1e-4
ATOL = 1e-5


def build(T):
    r = rng(53)
    nn = T.nn
    F = T.nn.functional

    def timestep_embedding(t, dim):
        half = dim // 2
        freqs = T.exp(-math.log(10000.0) * T.arange(half, dtype=T.float32) / half)
        args = t.float()[:, None] * freqs[None, :]
        return T.cat([T.cos(args), T.sin(args)], dim=-1)

    class Denoiser(nn.Module):
        def __init__(self, ch=8, tdim=16):
            super().__init__()
            self.tdim = tdim
            self.temb = nn.Sequential(nn.Linear(tdim, ch), nn.SiLU(), nn.Linear(ch, ch))
            self.down = nn.Conv2d(1, ch, 3, padding=1)
            self.pool = nn.AvgPool2d(2)
            self.mid = nn.Conv2d(ch, ch, 3, padding=1)
            self.norm = nn.GroupNorm(2, ch)
            self.up = nn.ConvTranspose2d(ch, ch, 2, stride=2)
            self.out = nn.Conv2d(2 * ch, 1, 3, padding=1)

        def forward(self, x, t):
            e = self.temb(timestep_embedding(t, self.tdim))
            h1 = F.silu(self.down(x)) + e[:, :, None, None]
            h2 = F.silu(self.norm(self.mid(self.pool(h1))))
            h3 = self.up(h2)
            return self.out(T.cat([h1, h3], dim=1))

    class DDPM(nn.Module):
        def __init__(self, steps=50):
            super().__init__()
            self.steps = steps
            betas = T.linspace(1e-4, 0.02, steps)
            alphas = 1.0 - betas
            self.register_buffer("betas", betas)
            self.register_buffer("alphas_cumprod", T.cumprod(alphas, dim=0))
            self.register_buffer("sqrt_ac", T.sqrt(self.alphas_cumprod))
            self.register_buffer("sqrt_1m_ac", T.sqrt(1.0 - self.alphas_cumprod))
            self.model = Denoiser()

        def q_sample(self, x0, t, noise):
            a = self.sqrt_ac.gather(0, t).view(-1, 1, 1, 1)
            b = self.sqrt_1m_ac[t].reshape(-1, 1, 1, 1)
            return a * x0 + b * noise

        def forward(self, x0, t, noise):
            xt = self.q_sample(x0, t, noise)
            pred = self.model(xt, t)
            return F.mse_loss(pred, noise), xt

    ddpm = init_module(T, DDPM())

    def fn(x0, t, noise):
        loss, xt = ddpm(x0, t, noise)
        return loss, xt.std()

    return fn, [(randn(T, r, 4, 1, 8, 8), randint(T, r, 0, 50, 4), randn(T, r, 4, 1, 8, 8))
                for _ in range(2)]
