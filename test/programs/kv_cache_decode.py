"""Incremental decoding with a preallocated key/value cache written in place at the current
position (slice assignment and index_copy_), attention over the filled prefix."""
from cutil import init_module, randn, rng

TAGS = ["mutation", "attention", "nn"]
RTOL, ATOL = 1e-4, 1e-5


def build(T):
    nn = T.nn
    D, MAXLEN = 8, 6
    qkv = init_module(T, nn.Linear(D, 3 * D))
    cache_k, cache_v = T.zeros(2, MAXLEN, D), T.zeros(2, MAXLEN, D)

    def fn(x, pos):
        q, k, v = qkv(x).chunk(3, dim=-1)                        # [2, 1, D] each
        cache_k[:, pos:pos + 1] = k
        cache_v.index_copy_(1, T.tensor([pos]), v)
        keys, vals = cache_k[:, :pos + 1], cache_v[:, :pos + 1]
        att = (q @ keys.transpose(1, 2) / D ** 0.5).softmax(-1)
        return att @ vals, cache_k.sum()

    r = rng(45)
    return fn, [(randn(T, r, 2, 1, D), p) for p in range(4)]
