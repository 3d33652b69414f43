"""torch.promote_types, result_type and can_cast: PyTorch's type promotion lattice over kiln's
dtypes (bool < integers < floating < complex), the same table its binary ops apply."""
from . import _C

__all__ = ["can_cast", "promote_types", "result_type"]

_INTS = [_C.uint8, _C.int8, _C.int16, _C.int32, _C.int64]
_FLOATS = [_C.float16, _C.bfloat16, _C.float32, _C.float64]


def _kind(dtype):
    if dtype.is_complex:
        return 3
    return 0 if dtype == _C.bool else 2 if dtype.is_floating_point else 1


def _complex_of(dtype):
    return _C.complex128 if dtype in (_C.float64, _C.complex128) else _C.complex64


def promote_types(type1, type2):
    """The smallest dtype both convert to without losing their kind or range."""
    if type1 == type2:
        return type1
    k1, k2 = _kind(type1), _kind(type2)
    if 3 in (k1, k2):
        # complex with float64 is complex128 (both keep their precision)
        wide = _C.float64 in (type1, type2) or _C.complex128 in (type1, type2)
        return _C.complex128 if wide else _C.complex64
    if k1 != k2:
        return type1 if k1 > k2 else type2
    if k1 == 1:
        if {type1, type2} == {_C.uint8, _C.int8}:
            return _C.int16
        if _C.uint8 in (type1, type2):
            other = type2 if type1 == _C.uint8 else type1
            return other
        return max(type1, type2, key=_INTS.index)
    if {type1, type2} == {_C.float16, _C.bfloat16}:
        return _C.float32
    return max(type1, type2, key=_FLOATS.index)


def _category_dtype(value):
    if isinstance(value, bool):
        return _C.bool
    if isinstance(value, int):
        return _C.int64
    if isinstance(value, float):
        return _C._get_default_dtype()
    if isinstance(value, complex):
        return _default_complex()
    raise TypeError(f"result_type(): expected a tensor or a number, got {type(value).__name__}")


def _default_complex():
    """The complex dtype paired with the default dtype (complex128 for float64)."""
    return _C.complex128 if _C._get_default_dtype() == _C.float64 else _C.complex64


def result_type(tensor1, tensor2):
    """The dtype of a binary op's result: dimensioned tensors first, then 0-d tensors, then
    Python numbers, each group counting only where it is of a higher kind than the ones before
    (a float number with an int tensor gives the default float; an int number never widens an
    int tensor)."""
    groups = [[], [], []]  # tensors with dims, 0-d tensors, numbers
    for v in (tensor1, tensor2):
        if isinstance(v, _C.TensorBase):
            groups[0 if v.dim() > 0 else 1].append(v.dtype)
        else:
            groups[2].append(_category_dtype(v))
    result = None
    for group in groups:
        if not group:
            continue
        dtype = group[0] if len(group) == 1 else promote_types(*group)
        if result is None:
            result = dtype
        elif _kind(dtype) > _kind(result):
            if _kind(result) == 2 and _kind(dtype) == 3:
                result = _complex_of(result)  # a complex number keeps a float tensor's precision
            else:
                result = dtype if group is not groups[2] or _kind(dtype) < 2 else (
                    _C._get_default_dtype() if _kind(dtype) == 2 else _default_complex())
    return result


def can_cast(from_, to):
    """Whether from_ casts to `to` without going down a kind (floating -> integer -> bool)."""
    return _kind(from_) <= _kind(to)
