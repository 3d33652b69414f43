"""torch._foreach_*: an op applied to each tensor of a list, as the multi-tensor optimizers written
outside torch call them (lion-pytorch's foreach Lion: `_foreach_mul_`, `_foreach_lerp_`,
`_foreach_sign_`, `_foreach_add_(params, updates, alpha=-lr)`). torch's overloads, results and
errors: the other operand is a number, a list of numbers, a 0-d tensor or a list of tensors; the
in-place forms return the list they were given, the others a tuple. Each is made of the per-tensor
ops, so it traces (and differentiates) as they do."""
from numbers import Number

from . import _C
from ._promotion import can_cast

_UNARY = ("abs acos asin atan ceil cos cosh erf erfc exp expm1 floor frac lgamma log log10 log1p log2 "
          "neg reciprocal round rsqrt sigmoid sign sin sinh sqrt tan tanh trunc").split()
_BINARY = ("add", "sub", "mul", "div", "clamp_max", "clamp_min", "maximum", "minimum", "pow")
# The ops with a one-tensor overload (a 0-d tensor); elsewhere a 0-d tensor without grad passes
# as a number, as torch's argument parser takes it. alpha: add and sub with a tensor list, add
# with one tensor.
_TENSOR_OVERLOAD = {"add", "mul", "div"}


def _is_tensor(x):
    return isinstance(x, _C.TensorBase)


def _tensor_list(value, name, what="self", position=1):
    if not isinstance(value, (list, tuple)) or not all(_is_tensor(t) for t in value):
        raise TypeError(f"_foreach_{name}(): argument '{what}' (position {position}) must be tuple of "
                        f"Tensors, not {type(value).__name__}")
    if not value:
        raise RuntimeError("Tensor list must have at least one tensor.")
    return value


def _per_tensor(other, n, name, position=2, tensor_overload=True):
    """`other` as one operand per tensor: a list of tensors or numbers, a 0-d tensor, a number."""
    if isinstance(other, (list, tuple)):
        if all(_is_tensor(o) for o in other):
            if len(other) != n:
                raise RuntimeError("Tensor lists must have the same number of tensors, got "
                                   f"{n} and {len(other)}")
        elif all(isinstance(o, Number) for o in other):
            if len(other) != n:
                raise RuntimeError("Tensor list must have same number of elements as scalar list.")
        else:
            raise TypeError(f"_foreach_{name}(): argument {position} must be a tuple of Tensors or of "
                            "numbers, not a mix")
        return list(other)
    if _is_tensor(other):
        if not tensor_overload and (other.dim() != 0 or other.requires_grad):
            raise TypeError(f"_foreach_{name}() received an invalid combination of arguments - got "
                            "(list, Tensor)")
        if other.dim() != 0:
            raise RuntimeError(f"scalar tensor expected to be 0 dim but it has {other.dim()} dimensions "
                               f"and {other.numel()} elements.")
        return [other] * n
    if isinstance(other, Number):
        return [other] * n
    raise TypeError(f"_foreach_{name}() received an invalid combination of arguments - got "
                    f"(list, {type(other).__name__})")


def _assign(t, result):
    """Writes an out-of-place result into t, as the in-place op would (same dtype rule)."""
    if result.dtype != t.dtype and not can_cast(result.dtype, t.dtype):
        raise RuntimeError(f"result type {_dtype_name(result.dtype)} can't be cast to the desired output "
                           f"type {_dtype_name(t.dtype)}")
    t.copy_(result)


def _dtype_name(dtype):
    return {"float32": "Float", "float64": "Double", "float16": "Half", "bfloat16": "BFloat16",
            "int64": "Long", "int32": "Int", "int16": "Short", "int8": "Char", "uint8": "Byte",
            "bool": "Bool"}.get(str(dtype).replace("kiln.", ""), str(dtype))


def _unary(name):
    def out_of_place(self):
        return tuple(getattr(t, name)() for t in _tensor_list(self, name))

    def in_place(self):
        for t in _tensor_list(self, name + "_"):
            method = getattr(t, name + "_", None)
            if method is not None:
                method()
            else:
                _assign(t, getattr(t, name)())
        return self

    return out_of_place, in_place


def _binary_op(name, t, o, alpha):
    if name in ("maximum", "minimum"):  # tensor-only ops: a number as a 0-d tensor promotes the same
        from ._creation import tensor
        return getattr(_C._ops, name)(t, o if _is_tensor(o) else tensor(o, device=t.device))
    if alpha is not None:
        return getattr(t, name)(o, alpha=alpha)
    return getattr(t, name)(o)


def _binary(name):
    def check_alpha(other, alpha):
        tensors = isinstance(other, (list, tuple)) and other and all(_is_tensor(o) for o in other)
        allowed = name in ("add", "sub") and tensors or name == "add" and _is_tensor(other)
        if alpha is not None and not allowed:
            raise TypeError(f"_foreach_{name}(): alpha is taken only by add and sub with a list of tensors "
                            "and by add with a tensor")

    def out_of_place(self, other, *, alpha=None):
        if isinstance(self, Number) and name == "pow":  # _foreach_pow(Scalar self, Tensor[] exponent)
            return tuple(_C._ops.pow(self, e) for e in _tensor_list(other, name, "exponent", 2))
        self = _tensor_list(self, name)
        check_alpha(other, alpha)
        others = _per_tensor(other, len(self), name, tensor_overload=name in _TENSOR_OVERLOAD)
        return tuple(_binary_op(name, t, o, alpha) for t, o in zip(self, others))

    def in_place(self, other, *, alpha=None):
        tensors = _tensor_list(self, name + "_")
        check_alpha(other, alpha)
        others = _per_tensor(other, len(tensors), name + "_", tensor_overload=name in _TENSOR_OVERLOAD)
        for t, o in zip(tensors, others):
            method = getattr(t, name + "_", None)
            if method is not None:
                method(o, alpha=alpha) if alpha is not None else method(o)
            else:
                _assign(t, _binary_op(name, t, o, alpha))
        return self

    return out_of_place, in_place


def _pointwise_values(value, n, name):
    """addcmul/addcdiv's value: a number, a list of numbers, or a 1-d tensor of n numbers."""
    if _is_tensor(value):
        if value.dim() != 1 or value.numel() != n:
            raise RuntimeError(f"_foreach_{name}: expected a 1-d tensor of {n} scalars, got shape "
                               f"{tuple(value.shape)}")
        return [value[i] for i in range(n)]
    if isinstance(value, (list, tuple)):
        if len(value) != n:
            raise RuntimeError("Tensor list must have same number of elements as scalar list.")
        return list(value)
    return [value] * n


def _addc(name):
    def compute(t, a, b, v):
        if _is_tensor(v):  # self + value * t1 (op) t2, in the order of ATen's kernel
            return t + (v * a * b if name == "addcmul" else v * a / b)
        return getattr(t, name)(a, b, value=v)

    def args(self, tensor1, tensor2, value, suffix):
        self = _tensor_list(self, name + suffix)
        n = len(self)
        t1 = _per_tensor(_tensor_list(tensor1, name + suffix, "tensor1", 2), n, name)
        t2 = _per_tensor(_tensor_list(tensor2, name + suffix, "tensor2", 3), n, name)
        return zip(self, t1, t2, _pointwise_values(value, n, name))

    def out_of_place(self, tensor1, tensor2, value=1):
        return tuple(compute(t, a, b, v) for t, a, b, v in args(self, tensor1, tensor2, value, ""))

    def in_place(self, tensor1, tensor2, value=1):
        for t, a, b, v in args(self, tensor1, tensor2, value, "_"):
            if _is_tensor(v):
                _assign(t, compute(t, a, b, v))
            else:
                getattr(t, name + "_")(a, b, value=v)
        return self

    return out_of_place, in_place


def _foreach_lerp(self, tensors1, weight):
    self = _tensor_list(self, "lerp")
    ends = _per_tensor(_tensor_list(tensors1, "lerp", "tensors1", 2), len(self), "lerp")
    return tuple(t.lerp(e, w) for t, e, w in zip(self, ends, _per_tensor(weight, len(self), "lerp", 3)))


def _foreach_lerp_(self, tensors1, weight):
    tensors = _tensor_list(self, "lerp_")
    ends = _per_tensor(_tensor_list(tensors1, "lerp_", "tensors1", 2), len(tensors), "lerp_")
    for t, e, w in zip(tensors, ends, _per_tensor(weight, len(tensors), "lerp_", 3)):
        t.lerp_(e, w)
    return self


def _foreach_norm(self, ord=2, dtype=None):
    from .linalg import vector_norm
    return tuple(vector_norm(t, ord, dtype=dtype) for t in _tensor_list(self, "norm"))


def _foreach_max(self):
    return tuple(t.max() for t in _tensor_list(self, "max"))


def _foreach_clone(self):
    return tuple(t.clone() for t in _tensor_list(self, "clone"))


def _foreach_zero_(self):
    for t in _tensor_list(self, "zero_"):
        t.zero_()
    return self


def _foreach_copy_(self, src, non_blocking=False):
    tensors = _tensor_list(self, "copy_")
    for t, s in zip(tensors, _per_tensor(_tensor_list(src, "copy_", "src", 2), len(tensors), "copy_")):
        t.copy_(s, non_blocking=non_blocking)
    return self


def install(namespace):
    """Puts the _foreach_* functions in `namespace` (the kiln module's globals)."""
    for name in _UNARY:
        namespace[f"_foreach_{name}"], namespace[f"_foreach_{name}_"] = _unary(name)
    for name in _BINARY:
        namespace[f"_foreach_{name}"], namespace[f"_foreach_{name}_"] = _binary(name)
    for name in ("addcmul", "addcdiv"):
        namespace[f"_foreach_{name}"], namespace[f"_foreach_{name}_"] = _addc(name)
    for f in (_foreach_lerp, _foreach_lerp_, _foreach_norm, _foreach_max, _foreach_clone, _foreach_zero_,
              _foreach_copy_):
        namespace[f.__name__] = f
