"""Python ints and floats that a compiled graph takes as inputs (automatic dynamic numbers, as
TorchDynamo's SymInt/SymFloat inputs): a frame argument whose value changed between compiles is
traced as a `TracedNumber`, a 0-d int64 or float64 tensor of the graph that follows Python's
number rules, so that one graph serves every value (`logits / (1.0 + 0.1 * step)` in a function
called with step = 0, 1, 2, ...).

Arithmetic keeps Python's result types (int op int is an int except for `/`, a float anywhere
makes a float); with a tensor, the number is cast first to the dtype the eager op would compute
in with a Python scalar (`kiln.result_type(x, value)`), so the values are those of eager code.
What would need the number's value at trace time (a comparison, a branch, `range(n)`, an index, a
size, a division by it that may be by zero, a conversion by a C function) raises
NotImplementedError: the tracer then compiles the frame with the number as a constant again
(frame_callback._number_inputs), as PyTorch specializes such a SymInt. Where a number leaves the
graph (returned, stored, handed to a resume function) the glue makes it a Python number again
(frontend/capture's Tracer::outputExpr)."""
import operator

import kiln
from kiln import _C


class NotTraced(NotImplementedError):
    """A use of a dynamic number that needs its value (the frame compiles it as a constant)."""


def number_input(value):
    """A Python int or float argument as the 0-d tensor the graph takes (the glue converts it at
    each call)."""
    return _C._ops.full([], value, dtype=_C.int64 if type(value) is int else _C.float64)


def _plain(v):
    return type(v) in (int, float, bool)


class TracedNumber:
    """A Python number during a trace: `tensor` holds its value (a 0-d graph value, int64 for an
    int, float64 for a float), `is_float` says which Python type it stands for."""

    __slots__ = ("tensor", "is_float")

    def __init__(self, tensor, is_float):
        self.tensor = tensor
        self.is_float = is_float

    def _as(self, is_float):
        return self.tensor.to(kiln.float64) if is_float and not self.is_float else self.tensor

    def _binary(self, other, op, reflected):
        if isinstance(other, kiln.Tensor):
            return _with_tensor(self, other, op, reflected)
        if not (_plain(other) or isinstance(other, TracedNumber)):
            return NotImplemented
        a, b = (other, self) if reflected else (self, other)
        other_float = other.is_float if isinstance(other, TracedNumber) else type(other) is float
        is_float = self.is_float or other_float or op == "truediv"
        if op in ("truediv", "floordiv", "mod"):
            # Python raises ZeroDivisionError where a tensor gives inf or nan: only a constant
            # non-zero divisor keeps the result a graph value.
            if isinstance(b, TracedNumber) or b == 0:
                raise NotTraced(f"a dynamic number divided by {'a dynamic number' if isinstance(b, TracedNumber) else 0}")
        if op == "pow":
            # int ** int is a float for a negative exponent, a negative float ** a fraction is
            # complex: only a constant non-negative int exponent is traced.
            if isinstance(b, TracedNumber) or type(b) is not int or b < 0:
                raise NotTraced("a dynamic number in a power other than to a constant non-negative int")
        ta = a._as(is_float) if isinstance(a, TracedNumber) else _constant(a, is_float)
        tb = b._as(is_float) if isinstance(b, TracedNumber) else _constant(b, is_float)
        return TracedNumber(_OPS[op](ta, tb), is_float)

    def __neg__(self):
        return TracedNumber(-self.tensor, self.is_float)

    def __pos__(self):
        return self

    def __abs__(self):
        return TracedNumber(self.tensor.abs(), self.is_float)

    def to_float(self):
        return TracedNumber(self._as(True), True)

    def to_int(self):
        return self if not self.is_float else TracedNumber(self.tensor.trunc().to(kiln.int64), False)

    def _needs_value(self, what):
        raise NotTraced(f"a dynamic {'float' if self.is_float else 'int'} used as {what} (its value is "
                        "specialized)")

    def __bool__(self):
        self._needs_value("a condition")

    def __index__(self):
        self._needs_value("an index or size")

    def __int__(self):
        self._needs_value("an int of a C function")

    def __float__(self):
        self._needs_value("a float of a C function")

    def __hash__(self):
        self._needs_value("a hash key")

    def __repr__(self):
        return f"TracedNumber({'float' if self.is_float else 'int'})"


def _constant(v, is_float):
    return float(v) if is_float else int(v)


# (One operand at least is a tensor: the other may be a Python constant.)
_OPS = {
    "add": lambda a, b: a + b,
    "sub": lambda a, b: a - b,
    "mul": lambda a, b: a * b,
    "truediv": lambda a, b: a / b,
    "floordiv": kiln.floor_divide,
    "mod": kiln.remainder,
    "pow": lambda a, b: a ** b,
}


def _with_tensor(number, tensor, op, reflected):
    """`number op tensor` (reflected: `tensor op number`): the number cast to the dtype that eager code computes
    in with a Python scalar of its type, as a 0-d tensor (0-d, it takes part in broadcasting and
    type promotion as the scalar would once it has that dtype)."""
    if op not in _OPS:
        return NotImplemented
    example = 0.5 if number.is_float else 2
    dtype = kiln.result_type(tensor, example)
    scalar = number.tensor.to(dtype)
    if op in ("floordiv", "mod") and not dtype.is_floating_point:
        raise NotTraced("an integer division by a dynamic number or of one by a tensor (it may be by zero)")
    return _OPS[op](tensor, scalar) if reflected else _OPS[op](scalar, tensor)


def _binary_method(op, reflected):
    def method(self, other):
        return self._binary(other, op, reflected)

    method.__name__ = f"__{'r' if reflected else ''}{op}__"
    return method


for _op in _OPS:
    setattr(TracedNumber, f"__{_op}__", _binary_method(_op, False))
    setattr(TracedNumber, f"__r{_op}__", _binary_method(_op, True))


def _compare(name):
    def method(self, other):
        self._needs_value("an operand of a comparison")

    method.__name__ = name
    return method


for _name in ("__eq__", "__ne__", "__lt__", "__le__", "__gt__", "__ge__"):
    setattr(TracedNumber, _name, _compare(_name))


def binary(name, a, b, inplace=False):
    """`operator.<name>(a, b)` where a or b is a TracedNumber (the tracer's BINARY_OP; `inplace`:
    `a <name>= b`): tensors raise TypeError on an unknown right operand instead of returning
    NotImplemented, so the number's methods are called directly."""
    op = name.strip("_")
    if op not in _OPS:
        raise NotTraced(f"the operator {name} on a dynamic number")
    if inplace and isinstance(a, kiln.Tensor):
        # `x += n`: tensor x written in place with the number cast as eager casts the scalar.
        if op in ("floordiv", "mod") and not a.dtype.is_floating_point:
            raise NotTraced("an integer division by a dynamic number (it may be by zero)")
        scalar = b.tensor.to(kiln.result_type(a, 0.5 if b.is_float else 2))
        return getattr(operator, f"i{op}")(a, scalar)
    if isinstance(a, TracedNumber):
        r = a._binary(b, op, False)
    else:
        r = b._binary(a, op, True)
    if r is NotImplemented:
        raise NotTraced(f"the operator {name} on a dynamic number and a {type(a if isinstance(b, TracedNumber) else b).__name__}")
    return r
