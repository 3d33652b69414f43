"""symbolic_trace: FX-style tracing by running the module on Proxies (no bytecode analysis).

kiln's functions are C++ op objects that know nothing of Proxies, so while a trace runs the
Tracer temporarily replaces them by proxy-aware wrappers (torch.fx gets the same effect for
`torch.*` through __torch_function__):

- the attributes `kiln.<name>` (op functions and kiln's Python functions),
  `kiln.nn.functional.<name>` and the functions of `autowrap_modules` (default: math);
- in the globals and closure variables of the traced function and of every forward it traces
  into, names bound to those functions (`from kiln import add`, `from math import sqrt`), to
  `autowrap_functions` and to functions marked with `kiln.fx.wrap`;
- `Module.__call__` (leaf modules become call_module nodes, others are traced into) and
  `Module.__getattr__` (parameters and buffers of the root become get_attr nodes);
- kiln.Tensor's binary operators, which give way to the Proxy's reflected operator when the
  other operand is a Proxy (`mask * x`), and `Tensor.__getitem__` with a Proxy index.

A wrapper records a call_function node when any argument is (or contains) a Proxy and calls the
original otherwise. Everything is restored when the trace ends, even on error; traces are
serialized by a lock because the patches are process-wide. Tensor methods called on a real
tensor with a Proxy argument (`t.add(x)`) are not intercepted: write `t + x` or `kiln.add(t, x)`.
"""
import inspect
import math
import os
import sys
import threading

from .. import _C
from .._tensor import Tensor
from ..nn.modules.container import ModuleDict, ModuleList, Sequential
from ..nn.modules.module import Module
from . import targets
from .graph import Graph
from .graph_module import GraphModule
from .proxy import Proxy, TraceError, find_proxy

_trace_lock = threading.RLock()
_wrapped_functions = []  # kiln.fx.wrap's functions: leaves of every trace
_FX_DIR = os.path.dirname(os.path.abspath(__file__))
_MISSING = object()

_TENSOR_BINARY_OPS = [f"__{p}{name}__" for name in (
    "add", "sub", "mul", "truediv", "floordiv", "mod", "pow", "matmul", "lshift", "rshift",
    "and", "or", "xor") for p in ("", "r")] + [f"__{n}__" for n in ("eq", "ne", "lt", "le", "gt", "ge")]


class _Patcher:
    """Replaces attributes and dict entries, and puts every original back on exit."""

    def __init__(self):
        self._undo = []
        self._patched = set()

    def set_attr(self, obj, name, value):
        key = (id(obj), name)
        if key in self._patched:
            return
        self._patched.add(key)
        own = obj.__dict__.get(name, _MISSING) if isinstance(obj, type) else getattr(obj, name, _MISSING)
        self._undo.append((obj, name, own, "attr"))
        setattr(obj, name, value)

    def set_item(self, d, name, value):
        key = (id(d), name)
        if key in self._patched:
            return
        self._patched.add(key)
        self._undo.append((d, name, d[name], "item"))
        d[name] = value

    def set_cell(self, cell, value):
        key = (id(cell), None)
        if key in self._patched:
            return
        self._patched.add(key)
        self._undo.append((cell, None, cell.cell_contents, "cell"))
        cell.cell_contents = value

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        while self._undo:
            obj, name, original, kind = self._undo.pop()
            if kind == "item":
                obj[name] = original
            elif kind == "cell":
                obj.cell_contents = original
            elif original is _MISSING:
                delattr(obj, name)
            else:
                setattr(obj, name, original)


def _function_wrapper(original, target):
    def wrapper(*args, **kwargs):
        proxy = find_proxy(args, kwargs)
        if proxy is None:
            return original(*args, **kwargs)
        return proxy.tracer.create_proxy("call_function", target, args, kwargs)

    wrapper.__name__ = getattr(original, "__name__", target.rsplit(".", 1)[-1])
    wrapper.__qualname__ = wrapper.__name__
    wrapper.__doc__ = getattr(original, "__doc__", None)
    wrapper.__wrapped__ = original
    wrapper.__kiln_fx_target__ = target
    return wrapper


def _tensor_operator(original):
    def operator_method(self, other):
        if isinstance(other, Proxy):
            return NotImplemented
        return original(self, other)

    return operator_method


def _tensor_getitem(original):
    def getitem(self, index):
        proxy = find_proxy((index,), {})
        if proxy is None:
            return original(self, index)
        return proxy.tracer.create_proxy("call_function", "operator.getitem", (self, index), {})

    return getitem


class Tracer:
    """Turns a Module's forward (or a function) into a Graph by running it on Proxies.

    Override `is_leaf_module` to choose which modules stay call_module nodes.
    """

    def __init__(self, autowrap_modules=(math,), autowrap_functions=()):
        self.autowrap_modules = tuple(autowrap_modules)
        self.autowrap_functions = tuple(autowrap_functions)

    # -- customization points ----------------------------------------------------------------
    def is_leaf_module(self, m, module_qualified_name):
        """kiln.nn's layers are leaves (call_module); containers and user modules are traced into."""
        return type(m).__module__.startswith("kiln.nn") and not isinstance(m, (Sequential, ModuleList, ModuleDict))

    # -- node creation -----------------------------------------------------------------------
    def create_node(self, kind, target, args, kwargs, name=None):
        node = self.graph.create_node(kind, target, args, kwargs, name)
        if kind.startswith("call_"):
            loc = self._user_location()
            if loc is not None:
                node._loc = loc
        return node

    def create_proxy(self, kind, target, args, kwargs, name=None):
        node = self.create_node(kind, target, self.create_arg(tuple(args)), self.create_arg(dict(kwargs)), name)
        return Proxy(node, self)

    def create_arg(self, a):
        """A graph argument for a traced value: Proxies become their nodes, the root's tensors
        get_attr nodes, other tensors constants stored as `_tensor_constant<N>` attributes."""
        if isinstance(a, Proxy):
            return a.node
        if isinstance(a, tuple):
            return tuple(self.create_arg(x) for x in a)
        if isinstance(a, list):
            return [self.create_arg(x) for x in a]
        if isinstance(a, dict):
            return {k: self.create_arg(v) for k, v in a.items()}
        if isinstance(a, slice):
            return slice(self.create_arg(a.start), self.create_arg(a.stop), self.create_arg(a.step))
        if isinstance(a, _C.TensorBase):
            path = self._tensor_paths.get(id(a))
            if path is None:
                path = f"_tensor_constant{len(self.tensor_constants)}"
                self.tensor_constants[path] = a
                self._tensor_paths[id(a)] = path
            return self._get_attr_proxy(path).node
        if isinstance(a, Module):
            path = self._module_paths.get(id(a))
            if path is None:
                raise TraceError(f"a {type(a).__name__} module that is not a submodule of the traced root "
                                 "cannot be a graph argument")
            return self._get_attr_proxy(path).node
        return a

    def _get_attr_proxy(self, path):
        proxy = self._attr_proxies.get(path)
        if proxy is None:
            proxy = Proxy(self.create_node("get_attr", path, (), {}), self)
            self._attr_proxies[path] = proxy
        return proxy

    def _user_location(self):
        frame = sys._getframe(2)
        while frame is not None and os.path.dirname(os.path.abspath(frame.f_code.co_filename)) == _FX_DIR:
            frame = frame.f_back
        if frame is None:
            return None
        return (frame.f_code.co_filename, frame.f_lineno, frame.f_code.co_name)

    # -- interception ------------------------------------------------------------------------
    def call_module(self, m, original_call, args, kwargs):
        path = self._module_paths.get(id(m))
        if path is None or not self.is_leaf_module(m, path):
            if path is None and self.is_leaf_module(m, ""):
                raise TraceError(f"{type(m).__name__} is called in the traced code but is not a submodule of "
                                 "the traced root; register it on the module so the graph can refer to it")
            self._autowrap(type(m).forward)
            return original_call(m, *args, **kwargs)
        return self.create_proxy("call_module", path, args, kwargs)

    def module_getattr(self, m, name, value):
        if isinstance(value, _C.TensorBase):
            path = self._tensor_paths.get(id(value))
            if path is not None and not path.startswith("_tensor_constant"):
                return self._get_attr_proxy(path)
        return value

    def _autowrap(self, fn):
        """Points fn's globals and closure variables bound to wrapped functions at the wrappers."""
        fn_globals = getattr(fn, "__globals__", {})
        for name, value in list(fn_globals.items()):
            wrapper = self._wrappers.get(id(value))
            if wrapper is not None and wrapper.__wrapped__ is value:
                self._patcher.set_item(fn_globals, name, wrapper)
        for cell in getattr(fn, "__closure__", None) or ():
            try:
                value = cell.cell_contents
            except ValueError:  # an empty cell
                continue
            wrapper = self._wrappers.get(id(value))
            if wrapper is not None and wrapper.__wrapped__ is value:
                self._patcher.set_cell(cell, wrapper)

    def _install_patches(self, fn):
        import kiln
        import kiln.nn.functional as F

        patcher = self._patcher
        targets._scan_defaults()
        self._wrappers = {}

        def wrap(original, target):
            wrapper = self._wrappers.get(id(original))
            if wrapper is None:
                wrapper = _function_wrapper(original, target)
                self._wrappers[id(original)] = wrapper
            return wrapper

        for module, prefix in ((kiln, "kiln"), (F, "kiln.nn.functional")):
            for name in dir(module):
                target = f"{prefix}.{name}"
                original = getattr(module, name)
                if targets._by_name.get(target) is original:
                    patcher.set_attr(module, name, wrap(original, target))
        for module in self.autowrap_modules:
            for name in dir(module):
                original = getattr(module, name)
                if name.startswith("_") or not callable(original) or isinstance(original, type):
                    continue
                try:
                    target = targets.qualified_name(original)
                except ValueError:
                    continue
                patcher.set_attr(module, name, wrap(original, target))
        for function in self.autowrap_functions + tuple(_wrapped_functions):
            wrap(function, targets.qualified_name(function))

        tracer = self
        original_call = Module.__call__
        original_getattr = Module.__getattr__

        def module_call(m, *args, **kwargs):
            return tracer.call_module(m, original_call, args, kwargs)

        def module_getattr(m, name):
            return tracer.module_getattr(m, name, original_getattr(m, name))

        patcher.set_attr(Module, "__call__", module_call)
        patcher.set_attr(Module, "__getattr__", module_getattr)
        for name in _TENSOR_BINARY_OPS:
            original = getattr(Tensor, name, None)
            if original is not None:
                patcher.set_attr(Tensor, name, _tensor_operator(original))
        if hasattr(Tensor, "__getitem__"):
            patcher.set_attr(Tensor, "__getitem__", _tensor_getitem(Tensor.__getitem__))
        self._autowrap(fn)

    # -- the trace ---------------------------------------------------------------------------
    def trace(self, root, concrete_args=None):
        """The Graph of root's forward (root a kiln.nn.Module) or of root itself (a function)."""
        if isinstance(root, Module):
            self.root = root
            fn = type(root).forward
            bound = [root]
            name = type(root).__name__
        elif callable(root):
            self.root = Module()
            fn = root
            bound = []
            name = getattr(root, "__name__", "fn")
        else:
            raise TypeError(f"symbolic_trace needs a kiln.nn.Module or a function, got {type(root).__name__}")
        concrete_args = dict(concrete_args or {})
        self.graph = Graph(name)
        self.tensor_constants = {}
        self._attr_proxies = {}
        self._module_paths = {id(m): path for path, m in self.root.named_modules()}
        self._tensor_paths = {}
        for path, t in self.root.named_buffers():
            self._tensor_paths.setdefault(id(t), path)
        for path, t in self.root.named_parameters():
            self._tensor_paths.setdefault(id(t), path)

        params = list(inspect.signature(fn).parameters.values())[len(bound):]
        unknown = set(concrete_args) - {p.name for p in params}
        if unknown:
            raise TraceError(f"concrete_args names {sorted(unknown)}, which {name} does not take")
        with _trace_lock, _Patcher() as patcher:
            self._patcher = patcher
            self._install_patches(fn)
            args, kwargs = [], {}
            for p in params:
                if p.kind in (p.VAR_POSITIONAL, p.VAR_KEYWORD):
                    raise TraceError(f"symbolic_trace cannot trace {name}'s *{p.name} parameter; give the "
                                     "function fixed parameters or fix them with concrete_args")
                value = concrete_args[p.name] if p.name in concrete_args else self.create_proxy(
                    "placeholder", p.name, (), {})
                if p.kind == p.KEYWORD_ONLY:
                    kwargs[p.name] = value
                else:
                    args.append(value)
            result = fn(*bound, *args, **kwargs)
            self.create_node("output", "output", (self.create_arg(result),), {})
            self._patcher = None
        return self.graph

    def attributes(self):
        """What the graph's get_attr and call_module targets refer to, by target."""
        found = {}
        for node in self.graph.nodes:
            if node.op not in ("get_attr", "call_module"):
                continue
            if node.target in self.tensor_constants:
                found[node.target] = self.tensor_constants[node.target]
                continue
            obj = self.root
            for atom in node.target.split("."):
                obj = getattr(obj, atom)
            found[node.target] = obj
        return found


def wrap(fn_or_name):
    """Makes a function a leaf of every trace: calls of it with Proxy arguments become
    call_function nodes instead of being traced into (for functions with control flow, say).
    Given a name, the function of that name in the caller's module. Returns its argument, so it
    works as a decorator."""
    fn = fn_or_name
    if isinstance(fn_or_name, str):
        fn = sys._getframe(1).f_globals.get(fn_or_name)
        if fn is None:
            raise NameError(f"kiln.fx.wrap: the calling module has no function named {fn_or_name!r}")
    if not callable(fn):
        raise TypeError(f"kiln.fx.wrap needs a function, got {type(fn).__name__}")
    try:
        targets.qualified_name(fn)  # fails now, not during a trace, when fn has no name
    except ValueError:
        # `@torch.fx.wrap` on a module-level function runs while its module is still importing:
        # the name does not resolve back yet, but it will be the module's attribute.
        module, qualname = getattr(fn, "__module__", None), getattr(fn, "__qualname__", "")
        if not isinstance(module, str) or not qualname or "<" in qualname or "." in qualname:
            raise
        targets.register(f"{module}.{qualname}", fn)
    if fn not in _wrapped_functions:
        _wrapped_functions.append(fn)
    return fn_or_name


def symbolic_trace(root, concrete_args=None):
    """A GraphModule recording what root (a kiln.nn.Module or a function) computes.

    concrete_args: {parameter name: value} fixes those parameters to constants (they do not
    become inputs of the graph).
    """
    tracer = Tracer()
    graph = tracer.trace(root, concrete_args)
    name = type(root).__name__ if isinstance(root, Module) else getattr(root, "__name__", "fn")
    gm = GraphModule(tracer.attributes(), graph, name)
    gm.training = tracer.root.training
    return gm
