"""A ViT front end: patch embedding by a strided Conv2d and, equivalently, by unfold + Linear,
flatten(2).transpose(1, 2), a class token expanded over the batch, learned position embeddings
interpolated (bicubic) to a new grid size, and a pre-norm attention block's first half."""
from cutil import init_module, randn, rng

TAGS = ["nn", "conv", "attention"]
RTOL, ATOL = 1e-4, 1e-4


def build(T):
    nn, F = T.nn, T.nn.functional
    P, D = 4, 12

    class ViTStem(nn.Module):
        def __init__(self):
            super().__init__()
            self.proj = nn.Conv2d(3, D, kernel_size=P, stride=P)
            self.cls = nn.Parameter(T.zeros(1, 1, D))
            self.pos = nn.Parameter(T.zeros(1, 1 + 2 * 2, D))
            self.norm = nn.LayerNorm(D, eps=1e-6)
            self.qkv = nn.Linear(D, 3 * D)

        def forward(self, img):
            B, _, Hh, Ww = img.shape
            x = self.proj(img).flatten(2).transpose(1, 2)                  # [B, N, D]
            patches = F.unfold(img, kernel_size=P, stride=P).transpose(1, 2)
            x2 = patches @ self.proj.weight.reshape(D, -1).T + self.proj.bias
            gh, gw = Hh // P, Ww // P
            grid = self.pos[:, 1:].reshape(1, 2, 2, D).permute(0, 3, 1, 2)
            grid = F.interpolate(grid, size=(gh, gw), mode="bicubic", align_corners=False)
            pos = T.cat([self.pos[:, :1], grid.flatten(2).transpose(1, 2)], dim=1)
            x = T.cat([self.cls.expand(B, -1, -1), x], dim=1) + pos
            q, k, v = self.qkv(self.norm(x)).chunk(3, dim=-1)
            att = (q @ k.transpose(-2, -1) * D ** -0.5).softmax(-1) @ v
            return x + att, x2

    model = init_module(T, ViTStem())
    r = rng(125)
    return model, [(randn(T, r, 2, 3, 12, 16),), (randn(T, r, 2, 3, 8, 8),)]
