"""F.scaled_dot_product_attention as transformer code calls it: is_causal, a boolean attn_mask,
an additive float mask, a custom scale, grouped-query attention by repeat_interleave of the
key/value heads, and the backward to q/k/v."""
from cutil import randn, rng

TAGS = ["attention", "nn", "autograd"]
RTOL, ATOL = 1e-4, 1e-5


def build(T):
    F = T.nn.functional

    def fn(q, k, v, bias):
        B, Hq, L, D = q.shape
        Hk = k.shape[1]
        kk = k.repeat_interleave(Hq // Hk, dim=1)
        vv = v.repeat_interleave(Hq // Hk, dim=1)
        a = F.scaled_dot_product_attention(q, kk, vv, is_causal=True)
        keep = T.ones(L, L, dtype=T.bool).tril(diagonal=1)
        b = F.scaled_dot_product_attention(q, kk, vv, attn_mask=keep)
        c = F.scaled_dot_product_attention(q, kk, vv, attn_mask=bias, scale=0.2)
        out = a + b + c
        gq, gk, gv = T.autograd.grad(out.square().sum(), [q, k, v])
        return out, gq, gk, gv

    r = rng(122)
    return fn, [(randn(T, r, 2, 4, 5, 8, requires_grad=True), randn(T, r, 2, 2, 5, 8, requires_grad=True),
                 randn(T, r, 2, 2, 5, 8, requires_grad=True), randn(T, r, 1, 1, 5, 5))]
