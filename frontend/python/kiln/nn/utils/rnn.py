"""kiln.nn.utils.rnn: pad_sequence and unpad_sequence (torch.nn.utils.rnn). PackedSequence (and
pack_padded_sequence) is not implemented: kiln's RNN modules take padded batches."""
from ... import _C

__all__ = ["pad_sequence", "unpad_sequence"]


def pad_sequence(sequences, batch_first=False, padding_value=0.0, padding_side="right"):
    """Tensors [L_i, *] -> one tensor [max L, B, *] (or [B, max L, *] with batch_first), each
    sequence at the start (padding_side "right") or the end ("left") of its row, the rest
    padding_value. Differentiable: built by cat, as the pieces are."""
    if padding_side not in ("left", "right"):
        raise ValueError(f"Expected padding_side to be one of left or right, but got {padding_side}.")
    if isinstance(sequences, _C.TensorBase):
        sequences = sequences.unbind(0)
    sequences = list(sequences)
    if not sequences:
        raise RuntimeError("received an empty list of sequences")
    trailing = tuple(sequences[0].shape[1:])
    for s in sequences:
        if s.dim() == 0 or tuple(s.shape[1:]) != trailing:
            raise RuntimeError(f"pad_sequence: the sequences must share their trailing dims {list(trailing)}; "
                               f"got a sequence of shape {list(s.shape)}")
    length = max(s.shape[0] for s in sequences)
    rows = []
    for s in sequences:
        pad = _C._ops.full([length - s.shape[0], *trailing], padding_value, dtype=s.dtype, device=s.device)
        rows.append(_C._ops.cat([s, pad] if padding_side == "right" else [pad, s], 0))
    out = _C._ops.stack(rows, 0)
    return out if batch_first else out.transpose(0, 1)


def unpad_sequence(padded_sequences, lengths, batch_first=False):
    """The inverse of pad_sequence (right padding): the first lengths[i] steps of row i."""
    if not batch_first:
        padded_sequences = padded_sequences.transpose(0, 1)
    lengths = lengths.tolist() if isinstance(lengths, _C.TensorBase) else list(lengths)
    return [row[:n] for row, n in zip(padded_sequences.unbind(0), lengths)]
