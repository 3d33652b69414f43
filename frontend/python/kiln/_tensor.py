"""kiln.Tensor and kiln.Size: the Python side of the tensor type."""
from . import _C
from ._creation import tensor as _tensor_from_data
from ._tensor_str import _str
from .autograd.grad_mode import no_grad as _no_grad

# Tensor.type() names, as torch.FloatTensor and the like are called.
_TYPE_NAMES = {
    _C.float32: "FloatTensor", _C.float64: "DoubleTensor", _C.float16: "HalfTensor",
    _C.bfloat16: "BFloat16Tensor", _C.uint8: "ByteTensor", _C.int8: "CharTensor",
    _C.int16: "ShortTensor", _C.int32: "IntTensor", _C.int64: "LongTensor", _C.bool: "BoolTensor",
    _C.complex64: "ComplexFloatTensor", _C.complex128: "ComplexDoubleTensor",
}
_TYPES_BY_NAME = {name: dtype for dtype, name in _TYPE_NAMES.items()}


class Size(tuple):
    """The shape of a tensor: a tuple of ints (torch.Size analogue)."""

    _kiln_trace_constant = True  # made of constants while tracing, a constant of the graph (frontend/capture)

    def __repr__(self):
        return f"kiln.Size([{', '.join(str(s) for s in self)}])"

    def numel(self):
        n = 1
        for s in self:
            n *= s
        return n


def _rebuild_pickled(cls, data, requires_grad, state):
    """Tensor.__reduce_ex__'s inverse."""
    if data[0] == "meta":
        _, size, stride, dtype = data
        t = _C._ops.empty_strided(list(size), list(stride), dtype=dtype, device="meta")
    else:
        raw, dtype, offset, size, stride, device = data
        t = _C._tensor_from_bytes(raw, dtype).as_strided(list(size), list(stride), offset)
        if device != "cpu":
            t = t.to(device)
    if cls is not Tensor:
        t = t.as_subclass(cls)
    if requires_grad:
        t.requires_grad_(True)
    t.__dict__.update(state)
    return t


def _legacy_new(dtype, args, device):
    """What torch's legacy constructors (torch.Tensor(...), torch.LongTensor(...)) make of their
    arguments: nothing -> an empty tensor; ints or a Size -> an uninitialized tensor of those
    sizes; a sequence or array -> a copy of its data converted to `dtype`."""
    if not args:
        return _C._ops.empty([0], dtype=dtype, device=device)
    if len(args) == 1 and isinstance(args[0], Size):
        args = tuple(args[0])
    if all(isinstance(a, int) and not isinstance(a, bool) for a in args):
        if any(a < 0 for a in args):
            raise RuntimeError(f"Trying to create tensor with negative dimension: {list(args)}")
        return _C._ops.empty(list(args), dtype=dtype, device=device)
    if len(args) == 1 and not isinstance(args[0], (bool, int, float)):
        return _tensor_from_data(args[0], dtype=dtype, device=device)
    raise TypeError(f"new(): invalid arguments {tuple(type(a).__name__ for a in args)}: expected "
                    "(*sizes), (Size), (sequence or array) or (Tensor)")


class Tensor(_C.TensorBase):
    """A strided n-dimensional array on a device, with PyTorch's API.

    `Tensor(t)` of a tensor is a new Tensor object over t's data (as nn.Parameter makes); the
    other forms are torch's legacy constructor (`Tensor(2, 3)`: uninitialized float32, `Tensor(
    [1, 2])`: float32 data; _legacy_new).
    """

    def __init__(self, *args, device=None):
        if len(args) == 1 and isinstance(args[0], _C.TensorBase) and device is None:
            if args[0].is_sparse:  # its C++ tensor is a placeholder without data (kiln/sparse)
                raise NotImplementedError(f"{type(self).__name__}(t) of a sparse tensor (layout kiln.sparse_coo): "
                                          "kiln's parameters and Tensor objects over another are strided only")
            _C.TensorBase.__init__(self, args[0])
        else:
            _C.TensorBase.__init__(self, _legacy_new(_C.float32, args, device))

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

    # `@` takes tensors only (a number is a TypeError, as in PyTorch, not a 0-d matmul).
    def __matmul__(self, other):
        if not isinstance(other, _C.TensorBase):
            return NotImplemented
        return self.matmul(other)

    def __rmatmul__(self, other):
        if not isinstance(other, _C.TensorBase):
            return NotImplemented
        return other.matmul(self)

    __hash__ = object.__hash__

    __repr__ = _str

    def __format__(self, format_spec):
        if self.dim() == 0 and not self.is_meta and type(self) is Tensor:
            return self.item().__format__(format_spec)
        return object.__format__(self, format_spec)

    # dtype and device conversions: each returns self when nothing changes.
    def float(self):
        return self.to(_C.float32)

    def double(self):
        return self.to(_C.float64)

    def half(self):
        return self.to(_C.float16)

    def bfloat16(self):
        return self.to(_C.bfloat16)

    def long(self):
        return self.to(_C.int64)

    def int(self):
        return self.to(_C.int32)

    def short(self):
        return self.to(_C.int16)

    def char(self):
        return self.to(_C.int8)

    def byte(self):
        return self.to(_C.uint8)

    def bool(self):
        return self.to(_C.bool)

    def cpu(self):
        return self.to("cpu")

    def cuda(self, device=None, non_blocking=False):
        if isinstance(device, int):
            device = f"cuda:{device}"
        return self.to(device if device is not None else "cuda", non_blocking=non_blocking)

    def type(self, dtype=None, non_blocking=False):
        """Without dtype: the type name ('kiln.FloatTensor'); with one: the tensor converted to it."""
        if dtype is None:
            where = "" if self.device.type == "cpu" else self.device.type + "."
            return f"kiln.{where}{_TYPE_NAMES[self.dtype]}"
        if isinstance(dtype, str):
            name = dtype.removeprefix("kiln.").removeprefix("torch.")
            on_cuda = name.startswith("cuda.")
            name = name.removeprefix("cuda.")
            if name not in _TYPES_BY_NAME:
                raise ValueError(f"invalid type: '{dtype}'")
            return self.to(device="cuda" if on_cuda else "cpu", dtype=_TYPES_BY_NAME[name])
        return self.to(getattr(dtype, "dtype", dtype), non_blocking=non_blocking)

    def type_as(self, other):
        return self.to(dtype=other.dtype, device=other.device)

    def new_tensor(self, data, dtype=None, device=None, requires_grad=False):
        return _tensor_from_data(data, dtype=dtype if dtype is not None else self.dtype,
                                 device=device if device is not None else self.device,
                                 requires_grad=requires_grad)

    def __deepcopy__(self, memo):
        """copy.deepcopy (of a module, an optimizer state, ...): a new leaf with a copy of the data,
        the same requires_grad, a deep copy of .grad and of Python attributes, as torch's. Only
        leaves can be copied: a result of autograd would lose its history."""
        if not self.is_leaf:
            raise RuntimeError("Only Tensors created explicitly by the user (graph leaves) support the "
                               "deepcopy protocol at the moment.  If you were attempting to deepcopy a module, "
                               "this may be because of a torch.nn.utils.weight_norm usage, see "
                               "https://github.com/pytorch/pytorch/pull/103001")
        if id(self) in memo:
            return memo[id(self)]
        import copy

        with _no_grad():
            data = self.clone()
        new = self._deepcopy_from(data)
        memo[id(self)] = new
        if type(self) is Tensor or not hasattr(new, "requires_grad_"):
            new.requires_grad_(self.requires_grad)
        if self.grad is not None:
            new.grad = copy.deepcopy(self.grad, memo)
        for key, value in getattr(self, "__dict__", {}).items():
            if key not in new.__dict__:
                setattr(new, key, copy.deepcopy(value, memo))
        return new

    def _deepcopy_from(self, data):
        """The copy of self over `data` (subclasses with other constructor arguments override)."""
        return data if type(self) is Tensor else type(self)(data)

    def __reduce_ex__(self, proto):
        """pickle, copy.copy and multiprocessing queues: the storage's bytes and this view of it
        (offset, sizes, strides), requires_grad, the subclass and the Python attributes, as torch
        pickles a tensor. Autograd history is not pickled: a result unpickles as a leaf."""
        if self.is_meta:
            data = ("meta", tuple(self.size()), tuple(self.stride()), self.dtype)
        else:
            host = self.detach() if self.is_cpu else self.detach().cpu()
            data = (_C._storage_bytes(host), self.dtype, host.storage_offset(), tuple(host.size()),
                    tuple(host.stride()), str(self.device))
        state = dict(self.__dict__)
        return (_rebuild_pickled, (type(self), data, bool(self.requires_grad), state))

    def __copy__(self):
        """copy.copy: a new tensor object over the same data (as torch's, whose pickle reduction
        hands copy.copy the storage itself), with requires_grad, the subclass and attributes."""
        new = self.detach()
        if type(self) is not Tensor:
            new = new.as_subclass(type(self))
        if self.requires_grad:
            new.requires_grad_(True)
        new.__dict__.update(self.__dict__)
        return new

    def as_subclass(self, cls):
        """A new object of Tensor subclass `cls` over the same data (cls's __init__ is not called)."""
        if not (isinstance(cls, type) and issubclass(cls, Tensor)):
            raise TypeError(f"as_subclass: expected a subclass of kiln.Tensor, got {cls!r}")
        new = _C.TensorBase.__new__(cls)
        _C.TensorBase.__init__(new, self)
        return new

    def backward(self, gradient=None, retain_graph=None, create_graph=False, inputs=None):
        """Accumulates d(self)/d(leaf) into each leaf's .grad (see kiln.autograd.backward)."""
        from . import autograd

        autograd.backward(self, gradient, retain_graph, create_graph, inputs=inputs)

    @property
    def data(self):
        """The same data, detached from the graph (writes to it are not seen by autograd)."""
        return self.detach()

    @data.setter
    def data(self, value):
        if not isinstance(value, _C.TensorBase):
            raise TypeError(f"data must be a Tensor, got {type(value).__name__}")
        if value.is_sparse != self.is_sparse:
            raise NotImplementedError("assigning .data across layouts (a sparse tensor's data to a strided one "
                                      "or the reverse)")
        if (tuple(value.shape) != tuple(self.shape) or value.dtype != self.dtype or value.device != self.device
                or tuple(value.stride()) != tuple(self.stride())):
            # Another shape, dtype, device or layout (Module.to(memory_format=channels_last)): this
            # object views value's data from now on (torch's set_data). Of the same geometry the
            # data is copied in, so that compiled graphs that hold this tensor's storage keep
            # seeing it.
            self._set_data(value)
            return
        with _no_grad():
            self.copy_(value)

    # Layouts and devices kiln does not have (dcgan tests `input.is_cuda or input.is_xpu`).
    is_sparse = is_sparse_csr = is_quantized = is_mkldnn = is_nested = property(lambda self: False)
    is_xpu = is_mps = is_xla = is_ipu = is_mtia = is_maia = is_vulkan = property(lambda self: False)

    # Python number protocols: one-element tensors only, with PyTorch's errors.
    def _one_value(self):
        if self.numel() != 1:
            raise ValueError("only one element tensors can be converted to Python scalars")
        return self.item()

    def __float__(self):
        return float(self._one_value())

    def __int__(self):
        return int(self._one_value())

    def __complex__(self):
        return complex(self._one_value())

    def __bool__(self):
        if self.numel() == 0:
            raise RuntimeError("Boolean value of Tensor with no values is ambiguous")
        if self.numel() > 1:
            raise RuntimeError("Boolean value of Tensor with more than one value is ambiguous")
        return bool(self.item())

    def __index__(self):
        if self.numel() != 1 or self.dtype.is_floating_point:
            raise TypeError("only integer tensors of a single element can be converted to an index")
        return int(self.item())

    # As torch.Tensor's: NumPy operators defer to the tensor's reflected ones, so
    # `np.float64(2) * t` is a Tensor (not an ndarray made from t's data).
    __array_priority__ = 1000

    def __array__(self, dtype=None, copy=None):
        a = self.numpy()
        if dtype is not None:
            a = a.astype(dtype, copy=False)
        return a.copy() if copy else a


_C._set_tensor_class(Tensor)
_C._set_size_class(Size)


class _LegacyTensorType(type):
    """The metaclass of kiln.FloatTensor and the like: isinstance(t, kiln.FloatTensor) asks
    whether t is a CPU tensor of that dtype, as in PyTorch."""

    def __instancecheck__(cls, obj):
        return isinstance(obj, _C.TensorBase) and obj.dtype == cls.dtype and obj.device.type == "cpu"

    def __call__(cls, *args, device=None):
        if len(args) == 1 and isinstance(args[0], _C.TensorBase):
            t = args[0]
            if t.dtype != cls.dtype:
                raise TypeError(f"expected {cls.dtype} (got {t.dtype})")
            return t
        return _legacy_new(cls.dtype, args, device)


def _legacy_type(dtype):
    return _LegacyTensorType(_TYPE_NAMES[dtype], (), {"dtype": dtype, "__module__": "kiln"})


# kiln.FloatTensor(2, 3), kiln.LongTensor([1, 2]), x.type(kiln.DoubleTensor), isinstance(x,
# kiln.BoolTensor): the legacy typed constructors, one per dtype.
# torch has no torch.ComplexFloatTensor class, only the type() name.
LEGACY_TENSOR_TYPES = {name: _legacy_type(dtype) for dtype, name in _TYPE_NAMES.items() if not dtype.is_complex}
