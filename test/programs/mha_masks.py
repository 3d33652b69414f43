"""nn.MultiheadAttention as models call it: self-attention with a key_padding_mask and a causal
float attn_mask, cross-attention with kdim/vdim and batch_first=False, averaged and per-head
attention weights, and a backward through it."""
import numpy as np
from cutil import init_module, randn, rng, tensor

TAGS = ["nn", "attention", "masking", "autograd"]
RTOL, ATOL = 1e-4, 1e-5


def build(T):
    nn = T.nn
    self_attn = init_module(T, nn.MultiheadAttention(16, 4, batch_first=True))
    cross = init_module(T, nn.MultiheadAttention(16, 2, kdim=10, vdim=6))

    def fn(x, mem, lengths):
        B, L, _ = x.shape
        pad = T.arange(L)[None, :] >= lengths[:, None]                  # True = ignore
        causal = T.triu(T.full((L, L), float("-inf")), diagonal=1)
        h, w = self_attn(x, x, x, key_padding_mask=pad, attn_mask=causal)
        h2, w2 = cross(h.transpose(0, 1), mem[..., :10], mem[..., 10:],
                       need_weights=True, average_attn_weights=False)
        loss = h2.pow(2).mean()
        g, = T.autograd.grad(loss, [self_attn.in_proj_weight])
        return h, w, h2, w2, g

    r = rng(103)
    lengths = tensor(T, np.array([5, 3], dtype=np.int64))
    return fn, [(randn(T, r, 2, 5, 16), randn(T, r, 7, 2, 16), lengths)]
