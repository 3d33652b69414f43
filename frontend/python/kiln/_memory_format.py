"""Memory formats (torch.memory_format): contiguous_format, channels_last (NHWC strides of a 4-D
tensor), channels_last_3d (NDHWC of a 5-D one) and preserve_format, taken by Tensor.contiguous,
is_contiguous, clone, to and Module.to. A channels_last tensor is an ordinary strided tensor
whose channel dim has stride 1; kiln's ops read any strides, and their results are contiguous
(values as torch's; torch's would keep the channels_last strides), except clone(), which keeps
a channels-last layout as torch's preserve_format does."""
from . import _C

__all__ = ["memory_format", "contiguous_format", "channels_last", "channels_last_3d", "preserve_format"]


class memory_format:
    """One of kiln's memory formats; compared by identity, as torch's."""

    def __init__(self, name):
        self._name = name

    def __repr__(self):
        return "kiln." + self._name

    def __reduce__(self):
        return self._name


contiguous_format = memory_format("contiguous_format")
channels_last = memory_format("channels_last")
channels_last_3d = memory_format("channels_last_3d")
preserve_format = memory_format("preserve_format")

_CHANNELS_LAST_RANK = {channels_last: 4, channels_last_3d: 5}


def _check(fmt):
    if not isinstance(fmt, memory_format):
        raise TypeError(f"memory_format must be a kiln.memory_format (kiln.contiguous_format, kiln.channels_last, "
                        f"kiln.channels_last_3d or kiln.preserve_format), not {type(fmt).__name__}")


def _channels_last_order(rank):
    """Dims from the largest stride to the smallest: N, the spatial dims, then C."""
    return [0, *range(2, rank), 1]


def _has_strides_of(t, order):
    expected = 1
    for d in reversed(order):
        if t.shape[d] != 1 and t.stride(d) != expected:
            return False
        expected *= t.shape[d]
    return True


def _rank_for(t, fmt):
    rank = _CHANNELS_LAST_RANK[fmt]
    if t.dim() != rank:
        name = "channels_last" if rank == 4 else "channels_last_3d"
        raise RuntimeError(f"required rank {rank} tensor to use {name} format")
    return rank


def _to_format(t, fmt, copy):
    """t with fmt's strides (t itself where it has them and no copy is asked for)."""
    _check(fmt)
    if fmt is preserve_format:
        return t.clone() if copy else t
    if fmt is contiguous_format:
        return _contiguous_op(t.clone() if copy else t)
    order = _channels_last_order(_rank_for(t, fmt))
    if not copy and _has_strides_of(t, order):
        return t
    inverse = [order.index(d) for d in range(len(order))]
    return _contiguous_op(t.permute(order)).permute(inverse)


def contiguous(self, memory_format=contiguous_format):
    if memory_format is contiguous_format:
        return _contiguous_op(self)
    if memory_format is preserve_format:
        raise RuntimeError("preserve memory format is unsupported by the contiguous operator")
    return _to_format(self, memory_format, copy=False)


def is_contiguous(self, memory_format=contiguous_format):
    if memory_format is contiguous_format:
        return _is_contiguous_op(self)
    _check(memory_format)
    if memory_format is preserve_format:
        raise RuntimeError("preserve memory format is unsupported by the contiguous operator")
    if self.dim() != _CHANNELS_LAST_RANK[memory_format]:
        return False
    return _has_strides_of(self, _channels_last_order(self.dim()))


def clone(self, *, memory_format=preserve_format):
    if memory_format is preserve_format:
        # A channels-last tensor's clone is channels-last, as torch's (kiln's clone op is
        # contiguous; other strides are not kept)
        rank = self.dim()
        if rank in (4, 5) and not _is_contiguous_op(self) and _has_strides_of(self, _channels_last_order(rank)):
            return _to_format(self, channels_last if rank == 4 else channels_last_3d, copy=True)
        return _clone_op(self)
    if memory_format is contiguous_format:
        return _clone_op(self)
    return _to_format(self, memory_format, copy=True)


def to(self, *args, memory_format=None, **kwargs):
    if memory_format is None:
        return _to_op(self, *args, **kwargs)
    out = _to_op(self, *args, **kwargs) if args or kwargs else self
    return _to_format(out, memory_format, copy=out is self and bool(kwargs.get("copy")))


_contiguous_op = _is_contiguous_op = _clone_op = _to_op = None


def _install_methods(tensor_class):
    global _contiguous_op, _is_contiguous_op, _clone_op, _to_op
    _contiguous_op, _is_contiguous_op = tensor_class.contiguous, tensor_class.is_contiguous
    _clone_op, _to_op = tensor_class.clone, tensor_class.to
    for fn in (contiguous, is_contiguous, clone, to):
        setattr(tensor_class, fn.__name__, fn)
