"""nn.Parameter: a tensor that a Module registers as a learnable parameter."""
from .._tensor import Tensor


class Parameter(Tensor):
    """A Tensor subclass: assigning one to a Module attribute registers it as a parameter.

    It is a new tensor object over the same data as `data`, with requires_grad set (so
    `Parameter(t)` leaves `t` itself untouched).
    """

    def __init__(self, data=None, requires_grad=True):
        if data is None:
            from .. import _C

            data = _C._ops.empty([0])
        super().__init__(data)
        self.requires_grad = requires_grad

    def __repr__(self):
        return "Parameter containing:\n" + super().__repr__()

    def __reduce_ex__(self, proto):
        return (Parameter, (Tensor(self), self.requires_grad))

    def _deepcopy_from(self, data):
        return type(self)(data, self.requires_grad)


class Buffer(Tensor):
    """A tensor that a Module registers as a buffer when assigned (torch.nn.Buffer)."""

    def __init__(self, data, persistent=True):
        super().__init__(data)
        self.persistent = persistent

    def _deepcopy_from(self, data):
        return type(self)(data, self.persistent)
