"""Embedding variants: padding_idx, max_norm renormalization (in place on the weight), scale by
frequency, from_pretrained frozen tables, EmbeddingBag-style mean pooling by offsets."""
from cutil import init_module, randint, randn, rng

TAGS = ["tier2", "nn", "embedding"]


def build(T):
    r = rng(79)
    nn = T.nn
    F = T.nn.functional
    plain = init_module(T, nn.Embedding(12, 5, padding_idx=0))
    normed = init_module(T, nn.Embedding(12, 5, max_norm=1.0), scale=1.0)
    frozen = nn.Embedding.from_pretrained(randn(T, r, 12, 5), freeze=True)
    table = randn(T, r, 12, 5)

    def fn(tokens, other):
        a = plain(tokens)
        b = normed(tokens)
        c = frozen(other)
        d = F.embedding(other, table, padding_idx=3)
        pooled = (a + b).mean(dim=1) + c.sum(dim=1) + d.amax(dim=1)
        return pooled, normed.weight.norm(dim=1)

    return fn, [(randint(T, r, 0, 12, 3, 4), randint(T, r, 0, 12, 3, 4)) for _ in range(2)]
