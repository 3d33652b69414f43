"""Batching inside the compiled function: pad_sequence of variable-length sequences, a padding
mask, default_collate of a list of dicts of tensors, pack_padded_sequence into a GRU."""
from cutil import init_module, randn, rng

TAGS = ["tier2", "data", "rnn"]
RTOL = 1e-4
ATOL = 1e-5


def build(T):
    r = rng(47)
    nn = T.nn
    rnn_utils = T.nn.utils.rnn
    from importlib import import_module
    default_collate = import_module(T.__name__ + ".utils.data").default_collate
    proj = init_module(T, nn.Linear(4, 6))

    def fn(seqs, samples):
        lengths = [s.shape[0] for s in seqs]
        padded = rnn_utils.pad_sequence(seqs, batch_first=True, padding_value=0.0)
        mask = T.arange(padded.shape[1])[None, :] < T.tensor(lengths)[:, None]
        h = proj(padded) * mask[..., None]
        pooled = h.sum(dim=1) / T.tensor(lengths, dtype=T.float32)[:, None]
        batch = default_collate(samples)
        feats = batch["x"] * batch["w"][:, None]
        return pooled, feats.sum(dim=0), batch["label"] + 1, mask.sum()

    def call(ns):
        seqs = [randn(T, r, n, 4) for n in ns]
        samples = [{"x": randn(T, r, 3), "w": randn(T, r), "label": T.tensor(i)} for i in range(4)]
        return seqs, samples

    return fn, [call((5, 3, 4)), call((5, 3, 4))]
