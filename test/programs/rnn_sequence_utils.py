"""torch.nn.utils.rnn beyond pad_sequence's defaults: pack_sequence (enforce_sorted=False) into a
GRU, pad_packed_sequence with total_length, unpad_sequence / unpack_sequence back to the
variable-length list, pad_sequence with padding_side="left" for decoder-style batches, and a
masked mean over the padded outputs; gradients."""
from cutil import init_module, randn, rng

TAGS = ["rnn", "nn", "autograd", "tier2"]
RTOL, ATOL = 1e-4, 1e-5
MAX_BREAKS = 1  # autograd.grad (torch._dynamo.explain fails on this program, so it gives no count)


def build(T):
    R = T.nn.utils.rnn
    gru = init_module(T, T.nn.GRU(3, 4, batch_first=True), seed=23)

    def fn(a, b, c):
        seqs = [a, b, c]
        packed = R.pack_sequence(seqs, enforce_sorted=False)
        out, h = gru(packed)
        padded, lengths = R.pad_packed_sequence(out, batch_first=True, total_length=6)
        back = R.unpad_sequence(padded, lengths, batch_first=True)
        unpacked = R.unpack_sequence(out)
        left = R.pad_sequence(seqs, batch_first=True, padding_value=-1.0, padding_side="left")
        mask = (T.arange(padded.shape[1])[None, :] < lengths[:, None]).unsqueeze(-1)
        mean = (padded * mask).sum(1) / lengths[:, None]
        ga, gc = T.autograd.grad(mean.sum() + h.sum(), [a, c])
        return padded.detach(), lengths, [t.detach() for t in back], [t.detach() for t in unpacked], left.detach(), \
            mean.detach(), ga, gc

    r = rng(182)
    return fn, [(randn(T, r, 4, 3, requires_grad=True), randn(T, r, 5, 3), randn(T, r, 2, 3, requires_grad=True))]
