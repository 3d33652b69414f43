"""Positional encodings: sinusoidal (written into strided slices of a buffer), learned,
ALiBi biases and rotary embeddings (RoPE) applied to queries/keys in attention."""
import math

from cutil import init_module, randn, rng

TAGS = ["nn", "attention"]
RTOL, ATOL = 1e-4, 1e-5


def build(T):
    nn = T.nn
    D, H, L = 8, 2, 6
    learned = init_module(T, nn.Embedding(16, D))

    def sinusoidal(n, d):
        pe = T.zeros(n, d)
        pos = T.arange(n, dtype=T.float32).unsqueeze(1)
        div = T.exp(T.arange(0, d, 2).float() * (-math.log(10000.0) / d))
        pe[:, 0::2] = T.sin(pos * div)
        pe[:, 1::2] = T.cos(pos * div)
        return pe

    def alibi(n, heads):
        slopes = T.tensor([2 ** (-8 * (i + 1) / heads) for i in range(heads)])
        dist = T.arange(n)[None, :] - T.arange(n)[:, None]
        return slopes[:, None, None] * dist.clamp(max=0)[None].float()

    def rope(x):
        n, d = x.shape[-2], x.shape[-1]
        inv = 1.0 / (10000 ** (T.arange(0, d, 2).float() / d))
        ang = T.outer(T.arange(n).float(), inv)
        cos, sin = ang.cos().repeat_interleave(2, -1), ang.sin().repeat_interleave(2, -1)
        x2 = T.stack((-x[..., 1::2], x[..., 0::2]), dim=-1).flatten(-2)
        return x * cos + x2 * sin

    def fn(x):
        B = x.shape[0]
        h = x + sinusoidal(L, D * H) + learned(T.arange(L)).repeat(1, H)
        q = h.view(B, L, H, D).transpose(1, 2)
        s = rope(q) @ rope(q).transpose(-1, -2) / math.sqrt(D) + alibi(L, H)
        return s.softmax(-1) @ q

    r = rng(34)
    return fn, [(randn(T, r, 2, L, D * H),)]
