"""Python source for a graph, as torch.fx generates it: `def forward(self, x, ...)` with one line
per node, which GraphModule execs to define its forward.

    def forward(self, x):
        linear = self.linear(x)
        relu = kiln.nn.functional.relu(linear, inplace=False)
        add = relu + x
        return add

call_function targets are written as their qualified names, looked up when the code runs (so
a tracer that patches `kiln.*` sees them when it traces a GraphModule again); `operator.*`
targets become Python operators, `builtins.getattr(x, "shape")` becomes `x.shape`, `aten.*`
and `prims.*` targets call the op table's overloads through kiln.fx.aten / kiln.fx.prims (targets that are not plain Python
paths of already imported modules, such as `aten.random_.from`, are global aliases resolved when
first called). Nodes whose names are not Python
identifiers (`%0`) or that clash with a keyword or a global of the code get a `_`-prefixed or
numbered name.
"""
import importlib
import itertools
import keyword
import math
import sys
import types

from .. import _C
from . import targets
from .targets import OP_NAMESPACES

_BINARY = {
    "add": "+", "sub": "-", "mul": "*", "truediv": "/", "floordiv": "//", "mod": "%", "pow": "**",
    "matmul": "@", "lshift": "<<", "rshift": ">>", "and_": "&", "or_": "|", "xor": "^",
    "eq": "==", "ne": "!=", "lt": "<", "le": "<=", "gt": ">", "ge": ">=",
}
_UNARY = {"neg": "-", "pos": "+", "invert": "~", "not_": "not "}

_DTYPE_NAMES = {getattr(_C, n): n for n in (
    "bool", "uint8", "int8", "int16", "int32", "int64", "float16", "bfloat16", "float32", "float64",
    "complex64", "complex128")}


class _Packet(types.SimpleNamespace):
    """An op whose default overload and named overloads one code both calls (`aten.round(x)`,
    `aten.round.decimals(x, 2)`): the overloads as attributes, callable as the default one."""

    def __call__(self, *args, **kwargs):
        return self.default(*args, **kwargs)


class _LazyTarget:
    """A call_function target resolved when the code first calls it (so generating code imports
    nothing, and a target that names no callable fails only when it runs)."""

    def __init__(self, target):
        self.target = target
        self.fn = None

    def __call__(self, *args, **kwargs):
        if self.fn is None:
            self.fn = targets.resolve(self.target)
        return self.fn(*args, **kwargs)


class PythonCode:
    """Generated source and the globals it must run with."""

    def __init__(self, src, globals):
        self.src = src
        self.globals = globals

    def __repr__(self):
        return f"PythonCode(src={self.src!r})"


class _Namer:
    """Python identifiers for node names: unique, not keywords, not the code's globals."""

    def __init__(self, reserved):
        self._used = set(reserved)
        self._names = {}

    def reserve(self, name):
        self._used.add(name)

    def __call__(self, node):
        name = self._names.get(node)
        if name is not None:
            return name
        base = node.name if node.name.isidentifier() else "_" + node.name
        name = base
        if keyword.iskeyword(name) or name in self._used:
            name = next(f"{base}_{i}" for i in itertools.count(1) if f"{base}_{i}" not in self._used)
        self._used.add(name)
        self._names[node] = name
        return name


class _Emitter:
    def __init__(self, graph, root_module, verbose):
        self.graph = graph
        self.root = root_module
        self.verbose = verbose
        self.globals = {"kiln": importlib.import_module("kiln"), "aten": targets.aten,
                        "prims": targets.prims}
        self.aliases = {}  # target -> global alias for targets without an importable path
        roots = {"kiln", "aten", "prims", "getattr", "slice", "float", root_module}
        for n in graph.nodes:
            if n.op == "call_function" and n.target.split(".")[0] not in OP_NAMESPACES:
                roots.add(n.target.split(".")[0])
        self.name = _Namer(roots)

    # -- expressions ----------------------------------------------------------------------
    def value(self, a):
        from .graph import Node

        if isinstance(a, Node):
            return self.name(a)
        if isinstance(a, float):
            if math.isnan(a):
                return 'float("nan")'
            if math.isinf(a):
                return 'float("inf")' if a > 0 else '-float("inf")'
            return repr(a)
        if a is None or isinstance(a, (bool, int, str)):
            return repr(a)
        if a is Ellipsis:
            return "..."
        if isinstance(a, _C.dtype):
            return f"kiln.{_DTYPE_NAMES[a]}"
        if isinstance(a, _C.device):
            return f'kiln.device("{a}")'
        if isinstance(a, slice):
            return f"slice({self.value(a.start)}, {self.value(a.stop)}, {self.value(a.step)})"
        if isinstance(a, list):
            return "[" + ", ".join(self.value(x) for x in a) + "]"
        if isinstance(a, tuple):
            items = [self.value(x) for x in a]
            return "(" + items[0] + ",)" if len(items) == 1 else "(" + ", ".join(items) + ")"
        if isinstance(a, dict):
            return "{" + ", ".join(f"{k!r}: {self.value(v)}" for k, v in a.items()) + "}"
        raise TypeError(f"cannot write a {type(a).__name__} in generated code")

    def operand(self, a):
        """A value as an operand of an operator: names and non-negative numbers bare, else in parentheses."""
        from .graph import Node

        text = self.value(a)
        simple = isinstance(a, Node) or (isinstance(a, (int, float)) and not isinstance(a, bool)
                                          and a >= 0 and not math.isinf(a))
        return text if simple else f"({text})"

    def receiver(self, a):
        """The object of an attribute access: a name bare, anything else in parentheses (`(1).real`)."""
        from .graph import Node

        return self.value(a) if isinstance(a, Node) else f"({self.value(a)})"

    def index(self, a):
        """A subscript as Python writes it: x[0], x[:, None], x[::2, ...]."""
        if isinstance(a, tuple) and a:
            return ", ".join(self.index_item(x) for x in a) + ("," if len(a) == 1 else "")
        return self.index_item(a)

    def index_item(self, a):
        if isinstance(a, slice):
            text = ":".join("" if v is None else self.value(v) for v in (a.start, a.stop))
            return text + (":" + self.value(a.step) if a.step is not None else "")
        return self.value(a)

    def call_args(self, args, kwargs):
        items = [self.value(a) for a in args]
        plain = {k: v for k, v in kwargs.items() if k.isidentifier() and not keyword.iskeyword(k)}
        items += [f"{k}={self.value(v)}" for k, v in plain.items()]
        other = {k: v for k, v in kwargs.items() if k not in plain}  # `from=` is written **{"from": ...}
        if other:
            items.append("**" + self.value(other))
        return ", ".join(items)

    def attribute_path(self, base, path):
        for atom in path.split("."):
            base = f"{base}.{atom}" if atom.isidentifier() and not keyword.iskeyword(atom) else f"getattr({base}, {atom!r})"
        return base

    def function(self, target):
        parts = target.split(".")
        if all(p.isidentifier() and not keyword.iskeyword(p) for p in parts) and self._is_live_path(parts):
            if parts[0] in OP_NAMESPACES:
                self._bind_op(parts)
            else:
                self.globals[parts[0]] = sys.modules[parts[0]]
            return target
        alias = self.aliases.get(target)
        if alias is None:
            alias = f"_fx_target_{len(self.aliases)}"
            self.aliases[target] = alias
            self.globals[alias] = _LazyTarget(target)
            self.name.reserve(alias)
        return alias

    def _bind_op(self, parts):
        """`aten.add.Tensor` (or `prims.add`) in the code reads plain attributes of a table made
        for this code (two dict lookups), not kiln.fx.aten's dynamic lookup, so calling an op
        from generated code costs what calling it from Python does."""
        table = self.globals[parts[0]]
        if table is getattr(targets, parts[0]):
            table = self.globals[parts[0]] = types.SimpleNamespace()
        name = ".".join(parts)
        try:
            fn = targets.resolve(name)
        except ValueError:
            fn = _LazyTarget(name)
        slot = getattr(table, parts[1], None)
        if len(parts) == 2:  # aten.clone: the default overload, callable as the packet itself
            if isinstance(slot, types.SimpleNamespace):  # overloads are bound too (aten.round.decimals)
                fn = _Packet(**{**vars(slot), "default": fn})
            setattr(table, parts[1], fn)
            return
        if slot is None:
            slot = types.SimpleNamespace()
        elif not isinstance(slot, types.SimpleNamespace):  # the default overload's function
            slot = _Packet(default=slot)
        setattr(slot, parts[2], fn)
        setattr(table, parts[1], slot)

    @staticmethod
    def _is_live_path(parts):
        """Whether the dotted path leads, through modules already imported, to the target's callable."""
        if parts[0] in OP_NAMESPACES:
            return True
        obj = sys.modules.get(parts[0])
        for part in parts[1:]:
            obj = getattr(obj, part, None)
        if obj is None:
            return False
        try:
            return obj is targets.resolve(".".join(parts))
        except ValueError:
            return False

    def call_function(self, target, args, kwargs):
        if target.startswith("operator.") and not kwargs:
            op = target[len("operator."):]
            if op in _BINARY and len(args) == 2:
                return f"{self.operand(args[0])} {_BINARY[op]} {self.operand(args[1])}"
            if op in _UNARY and len(args) == 1:
                return f"{_UNARY[op]}{self.operand(args[0])}"
            if op == "getitem" and len(args) == 2:
                return f"{self.operand(args[0])}[{self.index(args[1])}]"
        if (target == "builtins.getattr" and not kwargs and len(args) == 2 and isinstance(args[1], str)
                and args[1].isidentifier() and not keyword.iskeyword(args[1])):
            return f"{self.receiver(args[0])}.{args[1]}"
        return f"{self.function(target)}({self.call_args(args, kwargs)})"

    # -- statements -----------------------------------------------------------------------
    def node(self, n):
        op, target = n.op, n.target
        if op == "get_attr":
            return self.attribute_path(self.root, target)
        if op == "call_module":
            return f"{self.attribute_path(self.root, target)}({self.call_args(n.args, n.kwargs)})"
        if op == "call_method":
            obj, *rest = n.args
            plain = target.isidentifier() and not keyword.iskeyword(target)
            method = f"{self.receiver(obj)}.{target}" if plain else f"getattr({self.value(obj)}, {target!r})"
            return f"{method}({self.call_args(rest, n.kwargs)})"
        return self.call_function(target, n.args, n.kwargs)

    def emit(self):
        params, body, result = [], [], "None"
        for n in self.graph.nodes:
            comment = f"  # {n._type}" if self.verbose and n._type is not None else ""
            if n.op == "placeholder":
                params.append(self.name(n))
                if comment:
                    body.append(f"# {self.name(n)}: {n._type}")
            elif n.op == "output":
                result = self.value(n.args[0]) if n.args else "None"
            else:
                body.append(f"{self.name(n)} = {self.node(n)}{comment}")
        body.append(f"return {result}")
        signature = ", ".join([self.root] + params)
        src = f"def forward({signature}):\n" + "".join(f"    {line}\n" for line in body)
        return PythonCode(src, self.globals)


def python_code(graph, root_module="self", verbose=False):
    """PythonCode for `graph`: `verbose` adds each value's type as a comment."""
    for n in graph.nodes:
        if n.op == "call_method" and not n.args:
            raise ValueError(f"call_method node %{n.name} has no arguments (args[0] is the object)")
    return _Emitter(graph, root_module, verbose).emit()

