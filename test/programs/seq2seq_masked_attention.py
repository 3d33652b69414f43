"""Encoder-decoder attention with a key padding mask (per-sequence lengths) and a causal mask."""
import numpy as np

from cutil import init_module, randn, rng, tensor

TAGS = ["nn", "attention", "masking"]
RTOL, ATOL = 1e-4, 1e-5


def build(T):
    nn, F = T.nn, T.nn.functional
    D, H = 16, 2

    class Attn(nn.Module):
        def __init__(self):
            super().__init__()
            self.q, self.k, self.v, self.o = (nn.Linear(D, D) for _ in range(4))

        def forward(self, x, mem, mask):
            B, L, _ = x.shape
            S = mem.shape[1]
            q = self.q(x).view(B, L, H, D // H).transpose(1, 2)
            k = self.k(mem).view(B, S, H, D // H).transpose(1, 2)
            v = self.v(mem).view(B, S, H, D // H).transpose(1, 2)
            s = q @ k.transpose(-2, -1) / (D // H) ** 0.5
            s = s.masked_fill(~mask[:, None], float("-inf"))
            return self.o((s.softmax(-1) @ v).transpose(1, 2).reshape(B, L, D))

    class Seq2Seq(nn.Module):
        def __init__(self):
            super().__init__()
            self.self_attn, self.cross = Attn(), Attn()
            self.norm = nn.LayerNorm(D)

        def forward(self, src, tgt, src_len):
            B, S, _ = src.shape
            L = tgt.shape[1]
            pad = T.arange(S)[None, :] < src_len[:, None]          # [B, S] True = keep
            causal = T.ones(L, L, dtype=T.bool).tril()
            h = self.norm(tgt + self.self_attn(tgt, tgt, causal[None].expand(B, L, L)))
            return self.norm(h + self.cross(h, src, pad[:, None, :].expand(B, L, S)))

    model = init_module(T, Seq2Seq())
    r = rng(21)
    src_len = tensor(T, np.array([5, 3, 6], dtype=np.int64))
    return model, [(randn(T, r, 3, 6, D), randn(T, r, 3, 4, D), src_len)]
