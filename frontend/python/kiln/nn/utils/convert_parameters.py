"""Parameters as one flat vector and back (torch.nn.utils.parameters_to_vector and inverse)."""
from ... import _C
from ..._tensor import Tensor
from ...autograd.grad_mode import no_grad


def parameters_to_vector(parameters):
    return _C._ops.cat([p.reshape(-1) for p in parameters])


def vector_to_parameters(vec, parameters):
    """Copies consecutive slices of vec into the parameters (torch rebinds p.data to views of
    vec instead; the values are the same)."""
    if not isinstance(vec, Tensor):
        raise TypeError(f"expected kiln.Tensor, but got: {type(vec).__name__}")
    offset = 0
    with no_grad():
        for p in parameters:
            n = p.numel()
            p.copy_(vec[offset:offset + n].view_as(p))
            offset += n
