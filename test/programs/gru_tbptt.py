"""Truncated backpropagation through time: a GRU language model whose hidden state is carried
between calls and detached, gradient clipping, SGD; the hidden state is an input and an output
of each compiled step."""
from cutil import init_module, randint, rng

TAGS = ["training", "rnn", "nn", "tier2"]
RTOL, ATOL = 1e-4, 1e-5


def build(T):
    nn, F = T.nn, T.nn.functional

    class LM(nn.Module):
        def __init__(self):
            super().__init__()
            self.emb = nn.Embedding(20, 8)
            self.gru = nn.GRU(8, 12, num_layers=2)
            self.out = nn.Linear(12, 20)

        def forward(self, tokens, h):
            y, h = self.gru(self.emb(tokens), h)
            return self.out(y), h

    model = init_module(T, LM())
    opt = T.optim.SGD(model.parameters(), lr=0.5)

    def step(tokens, h):
        h = h.detach()
        opt.zero_grad()
        logits, h = model(tokens[:-1], h)
        loss = F.cross_entropy(logits.reshape(-1, 20), tokens[1:].reshape(-1))
        loss.backward()
        norm = nn.utils.clip_grad_norm_(model.parameters(), 1.0)
        opt.step()
        return loss.detach(), h, norm

    r = rng(127)
    h0 = T.zeros(2, 3, 12)
    calls = []
    for _ in range(3):
        calls.append((randint(T, r, 0, 20, 7, 3), h0))
    return step, calls
