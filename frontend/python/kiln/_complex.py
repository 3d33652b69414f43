"""Complex tensors at the Python level (docs/complex.md): torch.complex/polar/real/imag/conj/angle,
the Tensor methods and properties that go with them, and the conversions to Python values
(item, tolist, tensor() of complex data; numpy arrays go through DLPack's complex type).

A complex tensor is interleaved (re, im) pairs, as in torch; `view_as_real` shows them as a
trailing dim of 2 over the same storage. Everything here is written on that view, so it runs
eagerly, differentiates and traces as real ops do."""
import builtins

from . import _C

_ops = _C._ops

complex64 = cfloat = _C.complex64
complex128 = cdouble = _C.complex128

_PAIR_DTYPES = {_C.float32: _C.complex64, _C.float64: _C.complex128}


def is_complex(input):
    return input.dtype.is_complex


def complex(real, imag):
    """real + i * imag (torch.complex): both float32 or both float64, broadcast together."""
    if real.dtype != imag.dtype:
        raise RuntimeError(f"Expected object of scalar type {_short(real.dtype)} but got scalar type "
                           f"{_short(imag.dtype)} for second argument")
    if real.dtype not in _PAIR_DTYPES:
        raise RuntimeError(f"Expected both inputs to be Half, Float or Double tensors but got "
                           f"{_short(real.dtype)} and {_short(imag.dtype)}")
    if real.shape != imag.shape:
        from ._composites import broadcast_tensors
        real, imag = broadcast_tensors(real, imag)
    return _ops.view_as_complex(_ops.stack([real, imag], -1))


def polar(abs, angle):
    """abs * (cos(angle) + i sin(angle)) (torch.polar)."""
    return complex(abs * _ops.cos(angle), abs * _ops.sin(angle))


def real(input):
    """The real parts of a complex tensor, a view of it; a real tensor itself."""
    if not input.dtype.is_complex:
        return input
    return _ops.select(_ops.view_as_real(input), -1, 0)


def imag(input):
    """The imaginary parts of a complex tensor, a view of it."""
    if not input.dtype.is_complex:
        raise RuntimeError("imag is not implemented for tensors with non-complex dtypes.")
    return _ops.select(_ops.view_as_real(input), -1, 1)


def conj(input):
    """The complex conjugate. torch returns a lazy view with the conj bit set; kiln copies
    (is_conj() is always False, resolve_conj returns its input)."""
    if not input.dtype.is_complex:
        return input
    pairs = _ops.view_as_real(input)
    return _ops.view_as_complex(_ops.stack([_ops.select(pairs, -1, 0), -_ops.select(pairs, -1, 1)], -1))


conj_physical = conj


def resolve_conj(input):
    return input


def resolve_neg(input):
    return input


def is_conj(input):
    return False


def angle(input):
    """atan2(im, re) of a complex tensor; of a real one 0 or pi by sign (nan stays nan), as a float."""
    if input.dtype.is_complex:
        pairs = _ops.view_as_real(input)
        return _ops.atan2(_ops.select(pairs, -1, 1), _ops.select(pairs, -1, 0))
    x = input if input.dtype.is_floating_point else input.to(_C._get_default_dtype())
    return _ops.atan2(_ops.zeros_like(x), x)


def _short(dtype):
    return {_C.float16: "Half", _C.float32: "Float", _C.float64: "Double", _C.complex64: "ComplexFloat",
            _C.complex128: "ComplexDouble"}.get(dtype, str(dtype).removeprefix("kiln."))


# --- Python and numpy values ---

def _contains_complex(data):
    if isinstance(data, (list, tuple)):
        return any(_contains_complex(d) for d in data)
    return type(data).__name__.startswith("complex")


def _pairs(data):
    """Nested data with every number replaced by its [re, im] pair."""
    if isinstance(data, (list, tuple)):
        return [_pairs(d) for d in data]
    if isinstance(data, _C.TensorBase):
        return _pairs(data.tolist())
    value = builtins.complex(data.item() if hasattr(data, "item") else data)
    return [value.real, value.imag]


def complex_from_data(data, dtype):
    """kiln.tensor(data) where data holds complex numbers or dtype is complex (None: inferred,
    complex128 for complex numpy data, else the default dtype's complex: complex64 unless
    set_default_dtype(float64))."""
    if _is_numpy_array(data) and data.dtype.kind == "c":
        out = _C.from_numpy(data.copy())
        return out if dtype is None else out.to(dtype)
    if dtype is None:
        dtype = complex128 if _C._get_default_dtype() == _C.float64 else complex64
    real_dtype = _C.float64 if dtype == complex128 else _C.float32
    return _ops.view_as_complex(_C._tensor_from_data(_pairs(data), real_dtype))


def _is_numpy_array(data):
    cls = type(data)
    return cls.__name__ == "ndarray" and cls.__module__ == "numpy"


def is_complex_data(data, dtype):
    """Whether kiln.tensor(data, dtype=dtype) makes a complex tensor: a complex dtype=, a complex
    numpy array, or (dtype inferred) complex numbers in the data."""
    if dtype is not None:
        return getattr(dtype, "is_complex", False)
    if _is_numpy_array(data):
        return data.dtype.kind == "c"
    return _contains_complex(data)


def _install_methods(Tensor):
    base_item, base_tolist = Tensor.item, Tensor.tolist

    def item(self):
        if not self.dtype.is_complex:
            return base_item(self)
        if self.numel() != 1:
            raise RuntimeError(f"a Tensor with {self.numel()} elements cannot be converted to Scalar")
        re, im = base_tolist(_ops.view_as_real(self).reshape(2))
        return builtins.complex(re, im)

    def tolist(self):
        if not self.dtype.is_complex:
            return base_tolist(self)
        return _to_complex(base_tolist(_ops.view_as_real(self)), self.dim())

    Tensor.item, Tensor.tolist = item, tolist
    Tensor.real = property(real)
    Tensor.imag = property(imag)
    Tensor.conj = conj
    Tensor.conj_physical = conj
    Tensor.resolve_conj = resolve_conj
    Tensor.resolve_neg = resolve_neg
    Tensor.is_conj = is_conj
    Tensor.is_complex = is_complex
    Tensor.angle = angle
    Tensor.cfloat = lambda self: self.to(complex64)
    Tensor.cdouble = lambda self: self.to(complex128)


def _to_complex(pairs, depth):
    if depth == 0:
        return builtins.complex(pairs[0], pairs[1])
    return [_to_complex(p, depth - 1) for p in pairs]

