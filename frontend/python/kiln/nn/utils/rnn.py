"""kiln.nn.utils.rnn (torch.nn.utils.rnn): pad_sequence / unpad_sequence, and PackedSequence
with pack_padded_sequence, pad_packed_sequence, pack_sequence, unpack_sequence. A PackedSequence
is torch's: the time steps' rows concatenated (`data`), each step's batch size (`batch_sizes`,
int64 on the CPU, non-increasing), and the permutation that sorted the batch by decreasing length
(`sorted_indices`) with its inverse; kiln's RNN, LSTM and GRU take one and return one."""
from collections import namedtuple

from ... import _C
from ..._creation import tensor as _tensor

__all__ = ["PackedSequence", "pack_padded_sequence", "pad_packed_sequence", "pack_sequence", "unpack_sequence",
           "pad_sequence", "unpad_sequence", "invert_permutation"]

_ops = _C._ops


class PackedSequence(namedtuple("PackedSequence", ["data", "batch_sizes", "sorted_indices", "unsorted_indices"])):
    """(data, batch_sizes, sorted_indices, unsorted_indices), as torch's; made by
    pack_padded_sequence / pack_sequence rather than by hand."""

    def __new__(cls, data, batch_sizes=None, sorted_indices=None, unsorted_indices=None):
        if batch_sizes is None:
            raise ValueError("PackedSequence: batch_sizes is required (make one with pack_padded_sequence)")
        if unsorted_indices is None and sorted_indices is not None:
            unsorted_indices = invert_permutation(sorted_indices)
        return super().__new__(cls, data, batch_sizes, sorted_indices, unsorted_indices)

    def _with_data(self, data):
        return type(self)(data, self.batch_sizes, self.sorted_indices, self.unsorted_indices)

    def to(self, *args, **kwargs):
        data = self.data.to(*args, **kwargs)
        if data is self.data:
            return self
        move = lambda t: None if t is None else t.to(device=data.device)  # noqa: E731
        return type(self)(data, self.batch_sizes, move(self.sorted_indices), move(self.unsorted_indices))

    def cpu(self):
        return self.to("cpu")

    def cuda(self, *args, **kwargs):
        return self.to("cuda")

    def double(self):
        return self._with_data(self.data.double())

    def float(self):
        return self._with_data(self.data.float())

    def half(self):
        return self._with_data(self.data.half())

    def detach(self):
        return self._with_data(self.data.detach())

    @property
    def is_cuda(self):
        return self.data.is_cuda

    def is_pinned(self):
        return False


def invert_permutation(permutation):
    """The inverse of a permutation of 0..n-1 (None stays None)."""
    if permutation is None:
        return None
    out = _ops.empty_like(permutation)
    out.scatter_(0, permutation, _ops.arange(permutation.numel(), dtype=permutation.dtype,
                                             device=permutation.device))
    return out


def _lengths_list(lengths):
    if isinstance(lengths, _C.TensorBase):
        if lengths.dim() != 1:
            raise RuntimeError(f"'lengths' argument should be a 1D tensor, but got a {lengths.dim()}D tensor")
        return [int(n) for n in lengths.tolist()]
    return [int(n) for n in lengths]


def pack_padded_sequence(input, lengths, batch_first=False, enforce_sorted=True):
    """A padded batch [T, B, *] ([B, T, *] with batch_first) and each sequence's length -> a
    PackedSequence. With enforce_sorted=False the batch is sorted by decreasing length first and
    the permutation kept (pad_packed_sequence and the RNNs undo it)."""
    counts = _lengths_list(lengths)
    batch = input.shape[0] if batch_first else input.shape[1]
    if len(counts) != batch:
        raise RuntimeError(f"Expected `len(lengths)` to be equal to batch_size, but got {len(counts)} "
                           f"(batch_size={batch})")
    if enforce_sorted:
        if any(a < b for a, b in zip(counts, counts[1:])):
            raise RuntimeError("`lengths` array must be sorted in decreasing order when `enforce_sorted` is True. "
                               "You can pass `enforce_sorted=False` to pack_padded_sequence and/or pack_sequence to "
                               "sidestep this requirement if you do not need ONNX exportability.")
        sorted_indices = None
    else:
        order = sorted(range(len(counts)), key=lambda i: -counts[i])  # stable, as torch's sort
        counts = [counts[i] for i in order]
        if isinstance(lengths, _C.TensorBase):
            # The permutation as an op on the lengths: under kiln.compile a graph op on the
            # lengths input (their values, read above, are guarded), not a constant.
            sorted_indices = _ops.sort(lengths, stable=True, descending=True)[1].to(device=input.device)
        else:
            sorted_indices = _tensor(order, dtype=_C.int64, device=input.device)
        input = input.index_select(0 if batch_first else 1, sorted_indices)
    if counts and counts[-1] <= 0:
        raise RuntimeError("Length of all samples has to be greater than 0, but found an element in 'lengths' "
                           "that is <= 0")
    steps = input.shape[1] if batch_first else input.shape[0]
    if counts and counts[0] > steps:
        raise RuntimeError(f"Expected sequence length to be larger than or equal to the longest length "
                           f"{counts[0]}, but got a padded input of length {steps}")
    x = input.transpose(0, 1) if batch_first else input
    batch_sizes = [sum(1 for n in counts if n > t) for t in range(counts[0] if counts else 0)]
    data = _ops.cat([x[t, :b] for t, b in enumerate(batch_sizes)], 0)
    return PackedSequence(data, _tensor(batch_sizes, dtype=_C.int64), sorted_indices, None)


def _padded_sorted(sequence, padding_value, total_length=None):
    """[T, B, *] in the packed (sorted) batch order, and the sorted lengths."""
    sizes = [int(b) for b in sequence.batch_sizes.tolist()]
    data = sequence.data
    batch = sizes[0] if sizes else 0
    steps = len(sizes) if total_length is None else total_length
    trailing = list(data.shape[1:])
    rows, start = [], 0
    for b in sizes:
        step = data[start:start + b]
        start += b
        if b < batch:
            fill = _ops.full([batch - b, *trailing], padding_value, dtype=data.dtype, device=data.device)
            step = _ops.cat([step, fill], 0)
        rows.append(step)
    for _ in range(steps - len(sizes)):
        rows.append(_ops.full([batch, *trailing], padding_value, dtype=data.dtype, device=data.device))
    lengths = [sum(1 for b in sizes if b > i) for i in range(batch)]
    return _ops.stack(rows, 0), lengths


def pad_packed_sequence(sequence, batch_first=False, padding_value=0.0, total_length=None):
    """The inverse of pack_padded_sequence: (padded [T, B, *] or [B, T, *], lengths int64), in the
    batch's original order; total_length pads T further (to undo a pack of a longer batch)."""
    steps = sequence.batch_sizes.numel()
    if total_length is not None and total_length < steps:
        raise ValueError(f"Expected total_length to be at least the length of the longest sequence in input, but "
                         f"got total_length={total_length} and max sequence length being {steps}")
    padded, lengths = _padded_sorted(sequence, padding_value, total_length)
    # Each sequence's length as an op on batch_sizes (the steps whose batch covers it), so that
    # no tensor is made from Python data in a compiled function.
    position = _ops.arange(len(lengths), dtype=_C.int64).unsqueeze(1)
    lengths = (sequence.batch_sizes.unsqueeze(0) > position).sum(1)
    if sequence.unsorted_indices is not None:
        padded = padded.index_select(1, sequence.unsorted_indices)
        lengths = lengths.index_select(0, sequence.unsorted_indices.to(device=lengths.device))
    return (padded.transpose(0, 1) if batch_first else padded), lengths


def pack_sequence(sequences, enforce_sorted=True):
    """A list of tensors [L_i, *] -> a PackedSequence (pad_sequence, then pack_padded_sequence)."""
    lengths = [s.shape[0] for s in sequences]
    return pack_padded_sequence(pad_sequence(sequences), lengths, enforce_sorted=enforce_sorted)


def unpack_sequence(packed_sequences):
    """A PackedSequence -> the list of its sequences [L_i, *], in the original order."""
    padded, lengths = pad_packed_sequence(packed_sequences, batch_first=True)
    return unpad_sequence(padded, lengths, batch_first=True)


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
