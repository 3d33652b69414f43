"""kiln.fx.GraphModule: a kiln.nn.Module whose forward is generated from a Graph."""
import copy
import itertools
import linecache
import weakref

from .._tensor import Tensor
from ..nn.modules.module import Module
from ..nn.parameter import Parameter
from .graph import Graph

_code_ids = itertools.count()


def _copy_attr(source, target, path):
    """Copies the attribute at dotted `path` of module `source` to `target`, creating empty
    Modules for the intermediate atoms target lacks."""
    *prefix, field = path.split(".")
    for atom in prefix:
        src = getattr(source, atom)
        dst = getattr(target, atom, None)
        if dst is src:
            return
        if dst is None:
            dst = Module()
            setattr(target, atom, dst)
        source, target = src, dst
    _set_attr(target, field, getattr(source, field))


def _set_attr(module, field, value):
    # A plain tensor (not a Parameter) is a buffer, as in the module it came from.
    if isinstance(value, Tensor) and not isinstance(value, Parameter):
        module.register_buffer(field, value)
    else:
        setattr(module, field, value)


def _assign_attr(value, target, path):
    """Stores `value` at dotted `path` of module `target`, creating intermediate Modules."""
    *prefix, field = path.split(".")
    for atom in prefix:
        nxt = getattr(target, atom, None)
        if nxt is None:
            nxt = Module()
            setattr(target, atom, nxt)
        target = nxt
    _set_attr(target, field, value)


class _LazyForward:
    """GraphModule's forward before its code is generated: the first access (gm.forward, a call,
    type(gm).forward) generates it (recompile) and puts the function in its place."""

    def __init__(self, gm):
        self.gm = weakref.ref(gm)

    def __get__(self, obj, cls=None):
        gm = obj if obj is not None else self.gm()
        if gm is None:
            raise RuntimeError("the GraphModule of this forward no longer exists")
        if type(gm).__dict__.get("forward") is self:
            gm.recompile()
        forward = type(gm).__dict__["forward"]
        return forward if obj is None else forward.__get__(obj, cls)


class GraphModule(Module):
    """A Module made from a root (a Module or a dict of qualified name -> value) and a Graph.

    It holds the parameters, buffers and submodules the graph's get_attr and call_module nodes
    refer to (copied from the root), and its forward is the graph's Python code (`.code`), made
    by `recompile()`: call it after editing `.graph` in place (assigning `.graph` recompiles). The
    code is generated when first needed (`.forward`, a call, `.code`), not at construction.
    """

    def __new__(cls, *args, **kwargs):
        # Each instance gets its own class so that forward can be a class attribute per instance.
        base = next(b for b in cls.__mro__ if b.__qualname__.split(".")[-1] != "GraphModuleImpl")

        class GraphModuleImpl(base):
            pass

        return super().__new__(GraphModuleImpl)

    def __init__(self, root, graph, class_name="GraphModule"):
        super().__init__()
        type(self).__name__ = class_name
        if not isinstance(graph, Graph):
            raise TypeError(f"GraphModule needs a kiln.fx.Graph, got {type(graph).__name__}")
        paths = [n.target for n in graph.nodes if n.op in ("get_attr", "call_module")]
        if isinstance(root, Module):
            self.training = root.training
            for path in paths:
                _copy_attr(root, self, path)
        elif isinstance(root, dict):
            for path in paths:
                if path not in root:
                    raise RuntimeError(f"node target {path!r} is not in the dict of attributes given as root")
                _assign_attr(root[path], self, path)
        else:
            raise TypeError(f"GraphModule root must be a kiln.nn.Module or a dict, got {type(root).__name__}")
        self.graph = graph

    @property
    def graph(self):
        return self.__dict__["_graph"]

    @graph.setter
    def graph(self, graph):
        if not isinstance(graph, Graph):
            raise TypeError(f"GraphModule.graph must be a kiln.fx.Graph, got {type(graph).__name__}")
        self.__dict__["_graph"] = graph
        # forward is generated when first used (most graphs of the compile path never run as
        # Python: generating and compiling the code of a 10,000-node graph takes seconds).
        self.__dict__.pop("_code", None)
        type(self).forward = _LazyForward(self)

    @property
    def code(self):
        """The Python source of forward."""
        if "_code" not in self.__dict__:
            self.recompile()
        return self.__dict__["_code"]

    def recompile(self):
        """Regenerates forward from the graph; returns the PythonCode."""
        python_code = self.graph.python_code(root_module="self")
        src = python_code.src
        filename = f"<kiln.fx.GraphModule.{next(_code_ids)}>"
        # Registered so that tracebacks through forward show the generated lines.
        linecache.cache[filename] = (len(src), None, src.splitlines(True), filename)
        namespace = dict(python_code.globals)
        exec(compile(src, filename, "exec"), namespace)
        self.__dict__["_code"] = src
        type(self).forward = namespace["forward"]
        return python_code

    def print_readable(self, print_output=True):
        """The code with every value's type as a comment; printed unless print_output is False."""
        src = self.graph.python_code(root_module="self", verbose=True).src
        text = f"class {type(self).__name__}(kiln.nn.Module):\n" + "".join(
            f"    {line}\n" for line in src.splitlines())
        if print_output:
            print(text)
        return text

    def __str__(self):
        return f"{Module.__repr__(self)}\n\n{self.code}"

    def _attributes(self):
        """What the graph's get_attr and call_module targets refer to, by target."""
        found = {}
        for node in self.graph.nodes:
            if node.op in ("get_attr", "call_module"):
                obj = self
                for atom in node.target.split("."):
                    obj = getattr(obj, atom)
                found[node.target] = obj
        return found

    def __copy__(self):
        """A GraphModule with a copy of the graph, sharing parameters, buffers and submodules."""
        return GraphModule(self, self.graph.clone(), type(self).__name__)

    def __deepcopy__(self, memo):
        attributes = {path: copy.deepcopy(value, memo) for path, value in self._attributes().items()}
        gm = GraphModule(attributes, self.graph.clone(), type(self).__name__)
        gm.training = self.training
        return gm
