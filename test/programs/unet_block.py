"""A small U-Net: conv blocks with GroupNorm and SiLU, MaxPool2d down, ConvTranspose2d and
F.interpolate (bilinear, align_corners False/True; nearest) up, skip connections by cat, a
backward to the input."""
from cutil import init_module, randn, rng

TAGS = ["nn", "conv", "autograd", "tier2"]
RTOL, ATOL = 1e-4, 1e-4


def build(T):
    nn, F = T.nn, T.nn.functional

    def block(cin, cout):
        return nn.Sequential(nn.Conv2d(cin, cout, 3, padding=1), nn.GroupNorm(2, cout), nn.SiLU(),
                             nn.Conv2d(cout, cout, 3, padding=1, bias=False), nn.SiLU())

    class UNet(nn.Module):
        def __init__(self):
            super().__init__()
            self.d1, self.d2, self.mid = block(3, 4), block(4, 8), block(8, 8)
            self.pool = nn.MaxPool2d(2)
            self.up2 = nn.ConvTranspose2d(8, 8, kernel_size=2, stride=2)
            self.u2 = block(16, 4)
            self.u1 = block(8, 4)
            self.out = nn.Conv2d(4, 2, 1)

        def forward(self, x):
            s1 = self.d1(x)                                   # [B, 4, 16, 16]
            s2 = self.d2(self.pool(s1))                       # [B, 8, 8, 8]
            m = self.mid(self.pool(s2))                       # [B, 8, 4, 4]
            m = F.interpolate(m, scale_factor=2, mode="bilinear", align_corners=False)
            h = self.u2(T.cat([m, s2], dim=1))                # [B, 4, 8, 8]
            h = F.interpolate(h, size=(16, 16), mode="bilinear", align_corners=True)
            h = self.u1(T.cat([h, s1], dim=1))
            t = self.up2(s2)                                  # [B, 8, 16, 16]
            near = F.interpolate(s2, scale_factor=2, mode="nearest")
            return self.out(h) + (t - near).mean(dim=1, keepdim=True)

    model = init_module(T, UNet())

    def fn(x):
        y = model(x)
        g, = T.autograd.grad(y.square().mean(), [x])
        return y, g

    r = rng(108)
    return fn, [(randn(T, r, 2, 3, 16, 16, requires_grad=True),)]
