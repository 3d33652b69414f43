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

    # Operators map straight to the op objects: no Python frame on the hot path.
    __add__ = __radd__ = _C.TensorBase.add
    __sub__ = _C.TensorBase.sub
    __mul__ = __rmul__ = _C.TensorBase.mul
    __truediv__ = _C.TensorBase.div
    __floordiv__ = _C.TensorBase.floor_divide
    __mod__ = _C.TensorBase.remainder
    __pow__ = _C.TensorBase.pow
    __and__ = __rand__ = _C.TensorBase.bitwise_and
    __or__ = __ror__ = _C.TensorBase.bitwise_or
    __xor__ = __rxor__ = _C.TensorBase.bitwise_xor
    __lshift__ = _C.TensorBase.bitwise_left_shift
    __rshift__ = _C.TensorBase.bitwise_right_shift
    __lt__ = _C.TensorBase.lt
    __le__ = _C.TensorBase.le
    __gt__ = _C.TensorBase.gt
    __ge__ = _C.TensorBase.ge
    __neg__ = _C.TensorBase.neg
    __pos__ = _C.TensorBase.positive
    __abs__ = _C.TensorBase.abs
    __iadd__ = _C.TensorBase.add_
    __isub__ = _C.TensorBase.sub_
    __imul__ = _C.TensorBase.mul_
    __itruediv__ = _C.TensorBase.div_
    __ifloordiv__ = _C.TensorBase.floor_divide_
    __imod__ = _C.TensorBase.remainder_
    __ipow__ = _C.TensorBase.pow_
    __iand__ = _C.TensorBase.bitwise_and_
    __ior__ = _C.TensorBase.bitwise_or_
    __ixor__ = _C.TensorBase.bitwise_xor_
    __ilshift__ = _C.TensorBase.bitwise_left_shift_
    __irshift__ = _C.TensorBase.bitwise_right_shift_

    # == and != with an operand that is neither a tensor nor a number fall back to Python's
    # identity comparison (x == None is False), as PyTorch's do.
    def __eq__(self, other):
        try:
            return _C.TensorBase.eq(self, other)
        except TypeError:
            return NotImplemented

    def __ne__(self, other):
        try:
            return _C.TensorBase.ne(self, other)
        except TypeError:
            return NotImplemented

    # Reflected forms of the non-commutative operators, as PyTorch writes them.
    def __rsub__(self, other):
        return _C._ops.rsub(self, other)

    def __rtruediv__(self, other):
        return self.reciprocal() * other

    def __rfloordiv__(self, other):
        return _C._ops.floor_divide(other, self)

    def __rmod__(self, other):
        return _C._ops.remainder(other, self)

    def __rpow__(self, other):
        return _C._ops.pow(other, self)

    def __rlshift__(self, other):
        return _C._ops.bitwise_left_shift(other, self)

    def __rrshift__(self, other):
        return _C._ops.bitwise_right_shift(other, self)

    def __invert__(self):
        if self.dtype.is_floating_point:
            raise TypeError("~ (operator.invert) is only implemented on integer and Boolean-type tensors")
        return _C.TensorBase.bitwise_not(self)

    __hash__ = object.__hash__


_C._set_tensor_class(Tensor)
_C._set_size_class(Size)
