"""makemore's sampling loop: a causal-attention and a context-MLP language model called on a
sequence that grows by one token per call. The attention slices a block_size causal mask after
`assert t <= block_size`; the MLP rolls the sequence (`torch.roll(idx, 1, 1)`) and writes a blank
token into column 0 (the models are compiled, makemore's `logits[:, -1, :]` is outside). After
the first size change the frame compiles once over the length (as torch.compile's automatic
dynamic shapes), not once per length: the assert holds over the whole guarded range 2..12, the
roll's index start is fitted over the length, and the short range is probed at sizes other than
the program's own (2, 8, 11, 12)."""
import math

from cutil import init_module, randint, rng

TAGS = ["dynamic", "nn", "mutation"]
RTOL, ATOL = 1e-4, 1e-5
BLOCK, VOCAB, EMB = 12, 11, 8


def build(T):
    nn, F = T.nn, T.nn.functional

    class Attention(nn.Module):
        def __init__(self):
            super().__init__()
            self.wte, self.wpe = nn.Embedding(VOCAB, EMB), nn.Embedding(BLOCK, EMB)
            self.qkv, self.head = nn.Linear(EMB, 3 * EMB), nn.Linear(EMB, VOCAB)
            self.register_buffer("bias", T.tril(T.ones(BLOCK, BLOCK)).view(1, BLOCK, BLOCK))

        def forward(self, idx):
            b, t = idx.size()
            assert t <= BLOCK, f"Cannot forward sequence of length {t}, block size is only {BLOCK}"
            x = self.wte(idx) + self.wpe(T.arange(0, t, dtype=T.long).unsqueeze(0))
            q, k, v = self.qkv(x).split(EMB, dim=2)
            att = (q @ k.transpose(-2, -1)) * (1.0 / math.sqrt(EMB))
            att = F.softmax(att.masked_fill(self.bias[:, :t, :t] == 0, float("-inf")), dim=-1)
            return self.head(att @ v)

    class ContextMLP(nn.Module):
        def __init__(self):
            super().__init__()
            self.wte = nn.Embedding(VOCAB + 1, EMB)
            self.mlp = nn.Sequential(nn.Linear(3 * EMB, EMB), nn.Tanh(), nn.Linear(EMB, VOCAB))

        def forward(self, idx):
            embs = []
            for _ in range(3):
                embs.append(self.wte(idx))
                idx = T.roll(idx, 1, 1)
                idx[:, 0] = VOCAB  # the <BLANK> token
            return self.mlp(T.cat(embs, -1))

    attention, mlp = init_module(T, Attention()), init_module(T, ContextMLP(), seed=1)

    def fn(idx):
        with T.no_grad():
            return attention(idx).softmax(-1), mlp(idx).softmax(-1)

    r = rng(5)
    seq = randint(T, r, 0, VOCAB, 2, BLOCK)
    return fn, [(seq[:, :n].contiguous(),) for n in range(1, BLOCK + 1)]
