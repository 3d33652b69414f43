"""kiln.Tensor and kiln.Size: the Python side of the tensor type."""
from . import _C


class Size(tuple):
    """The shape of a tensor: a tuple of ints (torch.Size analogue)."""

    def __repr__(self):
        return f"kiln.Size([{', '.join(str(s) for s in self)}])"

    def numel(self):
        n = 1
        for s in self:
            n *= s
        return n


class Tensor(_C.TensorBase):
    """A strided n-dimensional array on a device, with PyTorch's API."""

    __add__ = _C.TensorBase.add
    __sub__ = _C.TensorBase.sub
    __mul__ = _C.TensorBase.mul
    __truediv__ = _C.TensorBase.div
    __iadd__ = _C.TensorBase.add_
    __isub__ = _C.TensorBase.sub_
    __imul__ = _C.TensorBase.mul_
    __itruediv__ = _C.TensorBase.div_

    def __radd__(self, other):
        return self.add(other)

    def __rmul__(self, other):
        return self.mul(other)

    __hash__ = object.__hash__


_C._set_tensor_class(Tensor)
_C._set_size_class(Size)
