"""Reproducible sampling with an explicit torch.Generator made and seeded inside the function (as
data-augmentation and sampling code does): randn/rand/randint/randperm/multinomial/bernoulli/
normal_ with generator=, dropout masks from the global seed set with manual_seed, and
torch.get_rng_state / set_rng_state to replay a draw."""
from cutil import randn, rng

TAGS = ["random", "graph-break", "tier2"]
RTOL, ATOL = 1e-5, 1e-6


def build(T):
    def fn(x, probs):
        g = T.Generator().manual_seed(7)
        noise = T.randn(x.shape, generator=g)
        u = T.rand(3, generator=g)
        ri = T.randint(0, 10, (4,), generator=g)
        perm = T.randperm(6, generator=g)
        ms = T.multinomial(probs, 2, replacement=False, generator=g)
        b = T.bernoulli(T.full((5,), 0.3), generator=g)
        n = T.empty(4).normal_(2.0, 0.5, generator=g)
        T.manual_seed(11)
        state = T.get_rng_state()
        d1 = T.nn.functional.dropout(x, 0.5, training=True)
        T.set_rng_state(state)
        d2 = T.nn.functional.dropout(x, 0.5, training=True)
        return x + 0.1 * noise, u, ri, perm, ms, b, n, d1, d2, g.initial_seed()

    r = rng(177)
    p = T.softmax(randn(T, r, 3, 6), -1)
    return fn, [(randn(T, r, 3, 4), p), (randn(T, r, 3, 4), p)]
