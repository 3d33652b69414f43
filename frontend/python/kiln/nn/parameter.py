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
        return (_rebuild_parameter, (type(self), Tensor(self), self.requires_grad, dict(self.__dict__)))

    def _deepcopy_from(self, data):
        return type(self)(data, self.requires_grad)


def _rebuild_parameter(cls, data, requires_grad, state):
    """Parameter.__reduce_ex__'s inverse: the parameter, with its Python attributes."""
    p = cls(data, requires_grad)
    p.__dict__.update(state)
    return p


class Buffer(Tensor):
    """A tensor that a Module registers as a buffer when assigned (torch.nn.Buffer)."""

    def __init__(self, data, persistent=True):
        super().__init__(data)
        self.persistent = persistent

    def _deepcopy_from(self, data):
        return type(self)(data, self.persistent)


class UninitializedTensorMixin:
    """A parameter or buffer whose shape a lazy module learns from its first input: an empty
    tensor until materialize() gives it a shape (and turns it into cls_to_become, in place)."""

    def materialize(self, shape, device=None, dtype=None):
        from .. import _C

        device = self.device if device is None else device
        dtype = self.dtype if dtype is None else dtype
        self._set_data(_C._ops.empty(list(shape), dtype=dtype, device=device))
        self.__class__ = self.cls_to_become

    @property
    def shape(self):
        raise RuntimeError("Can't access the shape of an uninitialized parameter or buffer. This error usually "
                           "happens in `load_state_dict` when trying to load an uninitialized parameter into an "
                           "initialized one. Call `forward` to initialize the parameters before accessing their "
                           "attributes.")

    def share_memory_(self):
        raise RuntimeError("Can't share memory on an uninitialized parameter or buffer. Call `forward` to initialize "
                           "the parameters before calling `module.share_memory()`.")

    def __repr__(self):
        return f"<{type(self).__name__}>"

    def __reduce_ex__(self, proto):
        return (type(self), (self.requires_grad,))

    def _deepcopy_from(self, data):
        return type(self)(self.requires_grad, device=data.device, dtype=data.dtype)


def _uninitialized_data(device, dtype):
    from .. import _C

    return _C._ops.empty([0], dtype=dtype, device=device)


class UninitializedParameter(UninitializedTensorMixin, Parameter):
    """A Parameter without a shape yet (lazy modules' weights); materialize() makes it a Parameter."""

    cls_to_become = Parameter

    def __init__(self, requires_grad=True, device=None, dtype=None):
        super().__init__(_uninitialized_data(device, dtype), requires_grad)


class UninitializedBuffer(UninitializedTensorMixin, Tensor):
    """A buffer without a shape yet (lazy batch norms' running statistics)."""

    cls_to_become = Tensor

    def __init__(self, requires_grad=False, device=None, dtype=None, persistent=True):
        super().__init__(_uninitialized_data(device, dtype))
        self.requires_grad = requires_grad
        self.persistent = persistent


def is_lazy(param):
    """Whether param is an uninitialized parameter or buffer (torch.nn.parameter.is_lazy)."""
    return isinstance(param, UninitializedTensorMixin)
