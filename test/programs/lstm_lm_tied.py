"""An LSTM language model with the decoder's weight tied to the embedding's, its hidden state
carried between calls and detached (truncated backpropagation through time)."""
from cutil import init_module, randint, rng

TAGS = ["tier2", "nn", "rnn"]
RTOL = 1e-4
ATOL = 1e-5


def build(T):
    r = rng(59)
    nn = T.nn

    class LM(nn.Module):
        def __init__(self, vocab=20, dim=12, layers=2):
            super().__init__()
            self.emb = nn.Embedding(vocab, dim)
            self.drop = nn.Dropout(0.0)
            self.rnn = nn.LSTM(dim, dim, num_layers=layers, batch_first=True)
            self.dec = nn.Linear(dim, vocab)
            self.dec.weight = self.emb.weight
            self.layers, self.dim = layers, dim

        def init_hidden(self, batch):
            w = self.emb.weight
            return (w.new_zeros(self.layers, batch, self.dim),
                    w.new_zeros(self.layers, batch, self.dim))

        def forward(self, tokens, hidden):
            e = self.drop(self.emb(tokens))
            out, hidden = self.rnn(e, hidden)
            return self.dec(self.drop(out)), hidden

    model = init_module(T, LM())
    state = {"hidden": None}

    def fn(tokens, targets):
        if state["hidden"] is None:
            state["hidden"] = model.init_hidden(tokens.shape[0])
        hidden = tuple(h.detach() for h in state["hidden"])
        logits, hidden = model(tokens, hidden)
        state["hidden"] = hidden
        loss = T.nn.functional.cross_entropy(logits.reshape(-1, logits.shape[-1]), targets.reshape(-1))
        return loss, hidden[0].sum(), model.dec.weight is model.emb.weight

    return fn, [(randint(T, r, 0, 20, 3, 7), randint(T, r, 0, 20, 3, 7)) for _ in range(3)]
