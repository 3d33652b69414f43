"""Language-model sampling with temperature, top-k and nucleus (top-p) filtering: sort, cumsum,
scatter of the removal mask back to vocabulary order, softmax, and inverse-CDF sampling from
uniform noise passed in (searchsorted on the cumulative probabilities)."""
from cutil import randn, rng, tensor

TAGS = ["sampling", "indexing", "sort"]
RTOL, ATOL = 1e-5, 1e-6


def build(T):
    def fn(logits, u, temperature, top_k, top_p):
        logits = logits / temperature
        kth = T.topk(logits, top_k, dim=-1).values[..., -1, None]
        logits = logits.masked_fill(logits < kth, float("-inf"))
        sorted_logits, sorted_idx = T.sort(logits, descending=True, dim=-1)
        cum = sorted_logits.softmax(-1).cumsum(-1)
        remove = cum > top_p
        remove[..., 1:] = remove[..., :-1].clone()
        remove[..., 0] = False
        mask = remove.scatter(-1, sorted_idx, remove)
        logits = logits.masked_fill(mask, float("-inf"))
        probs = logits.softmax(-1)
        cdf = probs.cumsum(-1)
        tok = T.searchsorted(cdf, u[:, None]).clamp(max=probs.shape[-1] - 1)
        logp = probs.gather(-1, tok).log()
        return probs, tok.squeeze(-1), logp

    r = rng(113)
    import numpy as np
    return fn, [(randn(T, r, 4, 12, scale=2.0), tensor(T, r.uniform(size=4).astype(np.float32)),
                 0.7, 5, 0.9),
                (randn(T, r, 4, 12, scale=2.0), tensor(T, r.uniform(size=4).astype(np.float32)),
                 1.3, 3, 0.8)]
