"""Masked language modelling: mask 15% of tokens from given uniforms (80% [MASK], 10% random,
10% kept), labels -100 elsewhere, embedding + encoder layer + tied output projection."""
import numpy as np

from cutil import init_module, rng, tensor

TAGS = ["training", "nn", "autograd", "masking", "tier2"]
RTOL, ATOL = 1e-3, 1e-4


def build(T):
    nn, F = T.nn, T.nn.functional
    V, D, MASK = 20, 16, 1

    class MLM(nn.Module):
        def __init__(self):
            super().__init__()
            self.emb = nn.Embedding(V, D)
            self.pos = nn.Parameter(T.zeros(1, 12, D))
            self.layer = nn.TransformerEncoderLayer(D, 2, 32, dropout=0.0, batch_first=True)

        def forward(self, ids):
            h = self.layer(self.emb(ids) + self.pos[:, :ids.shape[1]])
            return h @ self.emb.weight.t()

    model = init_module(T, MLM())

    def fn(ids, u, kind, rand_ids):
        masked = u < 0.15
        labels = T.where(masked, ids, T.full_like(ids, -100))
        inp = ids.clone()
        inp[masked & (kind < 0.8)] = MASK
        swap = masked & (kind >= 0.8) & (kind < 0.9)
        inp = T.where(swap, rand_ids, inp)
        logits = model(inp)
        loss = F.cross_entropy(logits.view(-1, V), labels.view(-1), ignore_index=-100)
        loss.backward()
        g = model.emb.weight.grad.clone()
        model.zero_grad()
        return loss.detach(), masked.sum(), g

    r = rng(29)
    ids = tensor(T, r.integers(2, V, size=(3, 12)).astype(np.int64))
    u = tensor(T, np.concatenate([[[0.05] * 12], r.random((2, 12))]).astype(np.float32))
    return fn, [(ids, u, tensor(T, r.random((3, 12)).astype(np.float32)),
                 tensor(T, r.integers(2, V, size=(3, 12)).astype(np.int64)))]
