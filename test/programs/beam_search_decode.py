"""Beam search decoding with a recurrent cell: topk over the beams' summed log-probabilities,
the surviving beams gathered, the chosen tokens written in place into a preallocated token
buffer that the next step reads (the writes of each step depend on that step's topk)."""
from cutil import init_module, randn, rng

TAGS = ["mutation", "indexing", "nn"]
RTOL, ATOL = 1e-4, 1e-5


def build(T):
    nn = T.nn
    B, V, S, D = 3, 7, 4, 5
    emb, proj = init_module(T, nn.Embedding(V, D)), init_module(T, nn.Linear(D, V), seed=1, scale=1.0)

    def fn(h):
        with T.no_grad():
            tokens = T.zeros(B, S + 1, dtype=T.int64)
            scores = T.zeros(B)
            for t in range(S):
                h = T.tanh(h + emb(tokens[:, t]))
                cand = (scores[:, None] + T.log_softmax(proj(h), dim=-1)).view(-1)
                top, idx = cand.topk(B)
                beam = T.div(idx, V, rounding_mode="floor")
                tokens.copy_(tokens.index_select(0, beam))
                tokens[:, t + 1] = idx % V
                h = h[beam]
                scores = top
            return tokens, scores

    return fn, [(randn(T, rng(3), B, D),)]
