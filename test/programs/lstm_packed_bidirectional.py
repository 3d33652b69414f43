"""A bidirectional two-layer LSTM over unsorted variable-length sequences:
pack_padded_sequence(enforce_sorted=False), pad_packed_sequence, the final hidden states of both
directions concatenated into a classifier, and gradients to the LSTM weights."""
import numpy as np
from cutil import init_module, randint, randn, rng, tensor

TAGS = ["nn", "rnn", "autograd", "tier2"]
RTOL, ATOL = 1e-4, 1e-5


def build(T):
    nn, F = T.nn, T.nn.functional
    rnn_utils = nn.utils.rnn

    class Classifier(nn.Module):
        def __init__(self):
            super().__init__()
            self.lstm = nn.LSTM(5, 8, num_layers=2, bidirectional=True, batch_first=True)
            self.head = nn.Linear(16, 3)

        def forward(self, x, lengths):
            packed = rnn_utils.pack_padded_sequence(x, lengths, batch_first=True,
                                                    enforce_sorted=False)
            out, (h, c) = self.lstm(packed)
            padded, out_len = rnn_utils.pad_packed_sequence(out, batch_first=True)
            feat = T.cat([h[-2], h[-1]], dim=1)
            return self.head(feat), padded, out_len

    model = init_module(T, Classifier())

    def fn(x, lengths, y):
        logits, padded, out_len = model(x, lengths)
        loss = F.cross_entropy(logits, y)
        loss.backward()
        g = model.lstm.weight_hh_l1_reverse.grad.clone()
        model.zero_grad()
        return loss.detach(), padded.detach(), out_len, g

    r = rng(105)
    lengths = tensor(T, np.array([3, 6, 2, 5], dtype=np.int64))
    return fn, [(randn(T, r, 4, 6, 5), lengths, randint(T, r, 0, 3, 4))]
