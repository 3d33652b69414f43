"""torch.nn.utils.rnn for padded batches: pad_sequence and unpad_sequence. PackedSequence (and so
pack_padded_sequence) is not implemented: the RNN modules take padded tensors only."""
from ... import _C
from ..._tensor import Tensor

__all__ = ["pad_sequence", "unpad_sequence", "pack_padded_sequence", "pad_packed_sequence", "pack_sequence"]


def pad_sequence(sequences, batch_first=False, padding_value=0.0, padding_side="right"):
    """A list of [L_i, *] tensors -> [L_max, B, *] (or [B, L_max, *] with batch_first), each
    padded with padding_value on the right (or left)."""
    if padding_side not in ("left", "right"):
        raise ValueError(f"Expected padding_side to be one of left or right, but got {padding_side}.")
    if isinstance(sequences, Tensor):
        sequences = sequences.unbind(0)
    sequences = list(sequences)
    if not sequences:
        raise RuntimeError("received an empty list of sequences")
    longest = max(s.size(0) for s in sequences)
    padded = []
    for s in sequences:
        extra = longest - s.size(0)
        # constant_pad_nd's pad list runs from the last dim backwards: only dim 0 grows.
        pad = [0, 0] * (s.dim() - 1) + ([extra, 0] if padding_side == "left" else [0, extra])
        padded.append(_C._ops.constant_pad_nd(s, pad, padding_value) if extra else s)
    return _C._ops.stack(padded, 0 if batch_first else 1)


def unpad_sequence(padded_sequences, lengths, batch_first=False):
    """The inverse of pad_sequence (right padding): a list of [L_i, *] tensors."""
    if not batch_first:
        padded_sequences = padded_sequences.transpose(0, 1)
    return [seq[:int(n)] for seq, n in zip(padded_sequences, lengths.tolist() if isinstance(lengths, Tensor) else lengths)]


def _packed_unsupported(name):
    def fn(*args, **kwargs):
        raise NotImplementedError(f"torch.nn.utils.rnn.{name}: PackedSequence is not supported by kiln; "
                                  "pass padded tensors (pad_sequence) and lengths instead")
    fn.__name__ = name
    return fn


pack_padded_sequence = _packed_unsupported("pack_padded_sequence")
pad_packed_sequence = _packed_unsupported("pad_packed_sequence")
pack_sequence = _packed_unsupported("pack_sequence")
