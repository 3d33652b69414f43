"""torch._utils helpers that model code imports (apex-style fp16 master weights, guided-diffusion's
fp16_util, Megatron): flattening a list of dense tensors into one buffer and back."""
from . import _C

_ops = _C._ops


def _flatten_dense_tensors(tensors):
    """One contiguous 1-D tensor holding the tensors' values in order (torch.cat of their flat
    views); a single tensor gives its flat copy."""
    tensors = list(tensors)
    if len(tensors) == 1:
        return tensors[0].contiguous().view(-1)
    return _ops.cat([t.contiguous().view(-1) for t in tensors], 0)


def _unflatten_dense_tensors(flat, tensors):
    """Views of `flat` shaped like each of `tensors`, in order (the inverse of _flatten_dense_tensors)."""
    outputs, offset = [], 0
    for t in tensors:
        n = t.numel()
        outputs.append(flat.narrow(0, offset, n).view_as(t))
        offset += n
    return tuple(outputs)
