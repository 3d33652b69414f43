"""kiln.fx.Graph and kiln.fx.Node: the C++ graph IR (ir/Graph.h, ir/Node.h) with torch.fx's API.

The graph lives in C++; these classes add torch.fx's spelling on top of the binding in
frontend/binding/FxBinding.cpp: node creation by opcode, insertion-point context managers,
`node.meta` as a mapping, Python code generation and the text form.
"""
from collections import namedtuple
from collections.abc import MutableMapping

from .. import _C
from . import targets

_fx = _C._fx
Type = _fx.Type

TensorMetadata = namedtuple("TensorMetadata", ["shape", "dtype", "stride", "device"])
SourceLoc = namedtuple("SourceLoc", ["file", "line", "function"])

_SHORT_DTYPE_NAMES = {
    _C.bool: "b8", _C.uint8: "u8", _C.int8: "i8", _C.int16: "i16", _C.int32: "i32", _C.int64: "i64",
    _C.float16: "f16", _C.bfloat16: "bf16", _C.float32: "f32", _C.float64: "f64",
    _C.complex64: "c64", _C.complex128: "c128",
}


def tensor_type(dtype, shape, stride=None, device=None):
    """A tensor Type: sizes and strides are ints or symbolic expressions as text ("s0", "2*s0")."""
    text = f"{_SHORT_DTYPE_NAMES[dtype]}[{', '.join(str(s) for s in shape)}]"
    extra = []
    if stride is not None:
        extra.append(f"strides=[{', '.join(str(s) for s in stride)}]")
    if device is not None and str(device) != "cpu":
        extra.append(f"device={device}")
    return Type(text + ("{" + ", ".join(extra) + "}" if extra else ""))


def type_of(value):
    """The Type of a runtime value (tensor, number, or tuple/list of those); None for others."""
    if isinstance(value, _C.TensorBase):
        stride = None if value.is_contiguous() else value.stride()
        return tensor_type(value.dtype, value.shape, stride, value.device)
    if isinstance(value, bool):
        return Type("bool")
    if isinstance(value, int):
        return Type("int")
    if isinstance(value, float):
        return Type("float")
    if isinstance(value, (tuple, list)):
        elements = [type_of(v) for v in value]
        if any(e is None for e in elements):
            return None
        return Type("(" + "".join(f"{e}, " for e in elements) + ")")
    return None


def _tensor_metadata(t):
    if t.kind == "tuple":
        return tuple(_tensor_metadata(e) for e in t.elements)
    if t.kind != "tensor":
        return None
    return TensorMetadata(t.shape, t.dtype, t.stride, t.device)


class NodeMeta(MutableMapping):
    """`node.meta`: the node's metadata in the IR, as a mapping.

    - "type": the node's kiln.fx.Type (set it to a Type or its text, e.g. "f32[8, s0]");
    - "tensor_meta": read-only, derived from the type: TensorMetadata(shape, dtype, stride,
      device) for tensors, a tuple of them for tuple types;
    - "source_loc": SourceLoc(file, line, function) of the Python code the node came from.

    Other keys are not stored (the IR keeps exactly what its text form prints).
    """

    _KEYS = ("type", "tensor_meta", "source_loc")

    def __init__(self, node):
        self._node = node

    def __getitem__(self, key):
        node = self._node
        if key == "type" and node._type is not None:
            return node._type
        if key == "tensor_meta" and node._type is not None:
            meta = _tensor_metadata(node._type)
            if meta is not None:
                return meta
        if key == "source_loc" and node._loc is not None:
            return SourceLoc(*node._loc)
        raise KeyError(key)

    def __setitem__(self, key, value):
        if key == "type":
            self._node._type = value
        elif key == "source_loc":
            self._node._loc = None if value is None else tuple(value)
        elif key == "tensor_meta":
            raise KeyError("node.meta['tensor_meta'] is derived from node.meta['type']: set the type instead")
        else:
            raise KeyError(f"kiln.fx node meta holds only {', '.join(map(repr, self._KEYS))}, not {key!r}")

    def __delitem__(self, key):
        if key not in self:
            raise KeyError(key)
        if key == "tensor_meta":
            raise KeyError("node.meta['tensor_meta'] is derived from node.meta['type']: delete the type instead")
        setattr(self._node, "_type" if key == "type" else "_loc", None)

    def __iter__(self):
        return (k for k in self._KEYS if k in self)

    def __contains__(self, key):
        try:
            self[key]
        except KeyError:
            return False
        return True

    def __len__(self):
        return sum(1 for _ in self)

    def __repr__(self):
        return repr(dict(self))


class Node(_fx.Node):
    """One operation of a Graph: `op` (opcode), `target` (text), `args`, `kwargs`, `users`, `meta`.

    Unlike torch.fx, a call_function target is its qualified name (a str such as "kiln.add" or
    "aten.add.Tensor"); kiln.fx.resolve_target(name) gives the callable.
    """

    @property
    def meta(self):
        return NodeMeta(self)

    @property
    def type(self):
        return self._type

    @type.setter
    def type(self, value):
        self._type = value

    @property
    def stack_trace(self):
        loc = self._loc
        return None if loc is None else f'  File "{loc[0]}", line {loc[1]}, in {loc[2]}\n'

    def update_kwarg(self, key, value):
        kwargs = self.kwargs
        kwargs[key] = value
        self.kwargs = kwargs

    def __repr__(self):
        return f"<erased node {self._handle_name}>" if self._erased else self.name


def map_arg(a, fn):
    """Applies fn to every Node in a nested structure of arguments; returns the new structure."""
    return map_aggregate(a, lambda x: fn(x) if isinstance(x, Node) else x)


def map_aggregate(a, fn):
    """Applies fn to every leaf of nested tuples, lists, dicts and slices."""
    if isinstance(a, tuple):
        mapped = tuple(map_aggregate(x, fn) for x in a)
        return type(a)(*mapped) if hasattr(a, "_fields") else mapped
    if isinstance(a, list):
        return [map_aggregate(x, fn) for x in a]
    if isinstance(a, dict):
        return {k: map_aggregate(v, fn) for k, v in a.items()}
    if isinstance(a, slice):
        return slice(map_aggregate(a.start, fn), map_aggregate(a.stop, fn), map_aggregate(a.step, fn))
    return fn(a)


class _InsertPoint:
    """Sets a graph's insertion point now; as a context manager, restores the old one on exit."""

    def __init__(self, graph, before):
        self._graph = graph
        self._saved = graph._insertion_point()
        graph._set_insertion_point(before)

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        saved = self._saved
        self._graph._set_insertion_point(None if saved is None or saved._erased else saved)


class Graph(_fx.Graph):
    """A function as a list of nodes in topological order (torch.fx.Graph's API).

    `str(graph)` is the text form (docs/ir-text.md); kiln.fx.parse reads it back.
    """

    # -- creation ---------------------------------------------------------------------------
    def create_node(self, op, target, args=(), kwargs=None, name=None, type_expr=None):
        if op == "call_function":
            target = targets.qualified_name(target)
        elif not isinstance(target, str):
            raise TypeError(f"the target of a {op} node is a str, got {type(target).__name__}")
        node = self._create(op, target, tuple(args), dict(kwargs) if kwargs else None, name)
        if type_expr is not None:
            node._type = type_expr
        return node

    def placeholder(self, name, type_expr=None):
        return self.create_node("placeholder", name, type_expr=type_expr)

    def get_attr(self, qualified_name, type_expr=None):
        return self.create_node("get_attr", qualified_name, type_expr=type_expr)

    def call_function(self, the_function, args=(), kwargs=None, type_expr=None, name=None):
        return self.create_node("call_function", the_function, args, kwargs, name, type_expr)

    def call_method(self, method_name, args=(), kwargs=None, type_expr=None, name=None):
        return self.create_node("call_method", method_name, args, kwargs, name, type_expr)

    def call_module(self, module_name, args=(), kwargs=None, type_expr=None, name=None):
        return self.create_node("call_module", module_name, args, kwargs, name, type_expr)

    def output(self, result, type_expr=None):
        return self.create_node("output", "output", (result,), type_expr=type_expr)

    def node_copy(self, node, arg_transform=lambda n: n):
        """A copy of `node` (from any graph) at the insertion point, its node arguments passed
        through arg_transform (which maps them to nodes of this graph)."""
        args = map_arg(node.args, arg_transform)
        kwargs = map_arg(node.kwargs, arg_transform)
        name = node.name if self.find_node(node.name) is None and node.op != "output" else None
        copy = self._create(node.op, node.target, args, kwargs, name)
        copy._type = node._type
        copy._loc = node._loc
        return copy

    # -- insertion points -------------------------------------------------------------------
    def inserting_before(self, n=None):
        """New nodes go before n (None: at the start); restores the old point when used in `with`."""
        if n is None:
            nodes = self.nodes
            return _InsertPoint(self, nodes[0] if nodes else None)
        return _InsertPoint(self, n)

    def inserting_after(self, n=None):
        """New nodes go after n (None: at the end); restores the old point when used in `with`."""
        return _InsertPoint(self, None if n is None else n.next)

    # -- queries and whole-graph operations -------------------------------------------------
    def find_nodes(self, *, op, target=None):
        if target is not None and op == "call_function":
            target = targets.qualified_name(target)
        return [n for n in self.nodes if n.op == op and (target is None or n.target == target)]

    def placeholders(self):
        return self.find_nodes(op="placeholder")

    def eliminate_dead_code(self):
        """Removes unused nodes without side effects (the "dce" pass); True when any went."""
        before = len(self)
        self._run_passes("dce")
        return len(self) != before

    def python_code(self, root_module="self", verbose=False):
        """The Python source of a function equivalent to the graph (see kiln.fx.codegen)."""
        from .codegen import python_code

        return python_code(self, root_module, verbose)

    def __repr__(self):
        return f"<kiln.fx.Graph @{self.name}: {len(self)} nodes>"

    def __copy__(self):
        return self.clone()

    def __deepcopy__(self, memo):
        return self.clone()


_fx._set_classes(Graph, Node)


def parse_all(text, file_name="<string>"):
    """Every graph of a text in the text form, in order (ValueError pointing at bad text)."""
    return _fx.parse(text, file_name)


def parse(text, file_name="<string>"):
    """The one graph of a text in the text form (ValueError otherwise)."""
    graphs = parse_all(text, file_name)
    if len(graphs) != 1:
        raise ValueError(f"{file_name}: expected exactly one graph, found {len(graphs)} (use kiln.fx.parse_all)")
    return graphs[0]
