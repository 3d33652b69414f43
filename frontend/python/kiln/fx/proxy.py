"""Proxy: the stand-in for a value during symbolic tracing. Every operation on a Proxy records a
node in the tracer's graph and returns a Proxy for the node's result.

- operators (`x + y`, `-x`, `x @ w`, `x[0, ::2]`, `x < 0`) record call_function `operator.*`;
- attribute reads record `builtins.getattr(x, "shape")` when the value is used, and method calls
  record call_method (`x.view(2, -1)` -> call_method view(%x, 2, -1));
- anything that needs a concrete value (`if x:`, `for a in x`, `len(x)`, `int(x)`) raises
  TraceError: the graph cannot depend on data it does not have.
"""
class TraceError(ValueError):
    """Symbolic tracing met Python code that needs a concrete value (control flow on a Proxy)."""


class Proxy:
    def __init__(self, node, tracer):
        self.node = node
        self.tracer = tracer

    def __repr__(self):
        return f"Proxy({self.node.name})"

    def __getattr__(self, name):
        if name.startswith("__") and name.endswith("__"):
            raise AttributeError(name)
        return Attribute(self, name)

    def __call__(self, *args, **kwargs):
        return self.tracer.create_proxy("call_method", "__call__", (self,) + args, kwargs)

    def __getitem__(self, index):
        return self.tracer.create_proxy("call_function", "operator.getitem", (self, index), {})

    def __setitem__(self, index, value):
        self.tracer.create_proxy("call_function", "operator.setitem", (self, index, value), {})

    # Python's protocols that need a concrete value.
    def __bool__(self):
        raise TraceError(f"symbolically traced variables cannot be used as inputs to control flow "
                         f"(bool() of %{self.node.name})")

    def __iter__(self):
        raise TraceError(f"Proxy object cannot be iterated (%{self.node.name}); its length is not "
                         "known while tracing")

    def __len__(self):
        raise TraceError(f"'len' is not supported in symbolic tracing (%{self.node.name}); "
                         "use x.size(dim) or x.shape instead")

    def __index__(self):
        raise TraceError(f"a Proxy cannot be used as a Python int (%{self.node.name})")

    def __int__(self):
        raise TraceError(f"int() of a Proxy needs a concrete value (%{self.node.name})")

    def __float__(self):
        raise TraceError(f"float() of a Proxy needs a concrete value (%{self.node.name})")

    __hash__ = object.__hash__


class Attribute(Proxy):
    """`proxy.name`: a getattr node, made only when the value is used (not for method calls)."""

    def __init__(self, root, attr):
        self.root = root
        self.attr = attr
        self.tracer = root.tracer
        self._node = None

    @property
    def node(self):
        if self._node is None:
            self._node = self.tracer.create_proxy("call_function", "builtins.getattr",
                                                  (self.root, self.attr), {}).node
        return self._node

    def __repr__(self):
        return f"Attribute({self.root!r}.{self.attr})"

    def __call__(self, *args, **kwargs):
        return self.tracer.create_proxy("call_method", self.attr, (self.root,) + args, kwargs)


def _binary(name, reflected):
    target = f"operator.{name}"

    if reflected:
        def method(self, other):
            return self.tracer.create_proxy("call_function", target, (other, self), {})
    else:
        def method(self, other):
            return self.tracer.create_proxy("call_function", target, (self, other), {})
    return method


def _unary(name):
    def method(self):
        return self.tracer.create_proxy("call_function", f"operator.{name}", (self,), {})
    return method


_BINARY_MAGIC = {
    "add": "add", "sub": "sub", "mul": "mul", "truediv": "truediv", "floordiv": "floordiv",
    "mod": "mod", "pow": "pow", "matmul": "matmul", "lshift": "lshift", "rshift": "rshift",
    "and": "and_", "or": "or_", "xor": "xor",
}
_COMPARISONS = {"eq": "eq", "ne": "ne", "lt": "lt", "le": "le", "gt": "gt", "ge": "ge"}

for _magic, _op in _BINARY_MAGIC.items():
    setattr(Proxy, f"__{_magic}__", _binary(_op, False))
    setattr(Proxy, f"__r{_magic}__", _binary(_op, True))
for _magic, _op in _COMPARISONS.items():
    setattr(Proxy, f"__{_magic}__", _binary(_op, False))
for _magic in ("neg", "pos", "invert", "abs"):
    setattr(Proxy, f"__{_magic}__", _unary(_magic))
del _magic, _op


def find_proxy(args, kwargs):
    """The first Proxy in nested args/kwargs, or None."""
    stack = [kwargs, args]
    while stack:
        a = stack.pop()
        if isinstance(a, Proxy):
            return a
        if isinstance(a, (tuple, list)):
            stack.extend(reversed(a))
        elif isinstance(a, dict):
            stack.extend(reversed(list(a.values())))
        elif isinstance(a, slice):
            stack.extend((a.step, a.stop, a.start))
    return None

