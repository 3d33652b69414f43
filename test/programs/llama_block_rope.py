"""A Llama-style decoder block: RMSNorm written by hand (rsqrt of the mean square), rotary
embeddings through view_as_complex / polar / view_as_real, grouped-query attention with a causal
mask, SwiGLU feed-forward, tied input/output embeddings; logits and the loss gradient."""
from cutil import init_module, randint, rng

TAGS = ["nn", "attention", "complex", "autograd", "tier2"]
RTOL, ATOL = 1e-4, 1e-4


def build(T):
    nn, F = T.nn, T.nn.functional
    V, D, H, KV, L = 32, 16, 4, 2, 6
    hd = D // H

    class RMSNorm(nn.Module):
        def __init__(self, d, eps=1e-5):
            super().__init__()
            self.eps, self.weight = eps, nn.Parameter(T.ones(d))

        def forward(self, x):
            xf = x.float()
            return (xf * T.rsqrt(xf.pow(2).mean(-1, keepdim=True) + self.eps)).type_as(x) * self.weight

    def rope_freqs(n, d, theta=10000.0):
        inv = 1.0 / (theta ** (T.arange(0, d, 2)[: d // 2].float() / d))
        ang = T.outer(T.arange(n, dtype=T.float32), inv)
        return T.polar(T.ones_like(ang), ang)

    def apply_rope(x, freqs):
        xc = T.view_as_complex(x.float().reshape(*x.shape[:-1], -1, 2))
        out = T.view_as_real(xc * freqs[None, :, None, :]).flatten(3)
        return out.type_as(x)

    class Block(nn.Module):
        def __init__(self):
            super().__init__()
            self.wq = nn.Linear(D, H * hd, bias=False)
            self.wk = nn.Linear(D, KV * hd, bias=False)
            self.wv = nn.Linear(D, KV * hd, bias=False)
            self.wo = nn.Linear(H * hd, D, bias=False)
            self.w1, self.w3 = nn.Linear(D, 24, bias=False), nn.Linear(D, 24, bias=False)
            self.w2 = nn.Linear(24, D, bias=False)
            self.n1, self.n2 = RMSNorm(D), RMSNorm(D)

        def forward(self, x, freqs, mask):
            B, S, _ = x.shape
            h = self.n1(x)
            q = apply_rope(self.wq(h).view(B, S, H, hd), freqs)
            k = apply_rope(self.wk(h).view(B, S, KV, hd), freqs)
            v = self.wv(h).view(B, S, KV, hd)
            k = k[:, :, :, None].expand(B, S, KV, H // KV, hd).reshape(B, S, H, hd)
            v = v[:, :, :, None].expand(B, S, KV, H // KV, hd).reshape(B, S, H, hd)
            q, k, v = q.transpose(1, 2), k.transpose(1, 2), v.transpose(1, 2)
            s = q @ k.transpose(2, 3) / hd ** 0.5 + mask
            a = (F.softmax(s.float(), dim=-1).type_as(q) @ v).transpose(1, 2).reshape(B, S, D)
            x = x + self.wo(a)
            h = self.n2(x)
            return x + self.w2(F.silu(self.w1(h)) * self.w3(h))

    class LM(nn.Module):
        def __init__(self):
            super().__init__()
            self.emb = nn.Embedding(V, D)
            self.blocks = nn.ModuleList([Block(), Block()])
            self.norm = RMSNorm(D)
            self.out = nn.Linear(D, V, bias=False)
            self.out.weight = self.emb.weight

        def forward(self, tokens):
            S = tokens.shape[1]
            freqs = rope_freqs(S, hd)
            mask = T.full((S, S), float("-inf")).triu(1)
            x = self.emb(tokens)
            for b in self.blocks:
                x = b(x, freqs, mask)
            return self.out(self.norm(x))

    model = init_module(T, LM())

    def fn(tokens):
        logits = model(tokens)
        loss = F.cross_entropy(logits[:, :-1].reshape(-1, V), tokens[:, 1:].reshape(-1))
        g, = T.autograd.grad(loss, [model.emb.weight])
        return logits, loss, g, len(list(model.parameters()))

    r = rng(123)
    return fn, [(randint(T, r, 0, V, 2, L),)]
